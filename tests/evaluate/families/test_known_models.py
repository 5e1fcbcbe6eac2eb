"""The known-models table: every row names a family that exists and a source for each claim, `rmb models` lists
them, and a bad extra table ($RMB_KNOWN_MODELS) is refused in one line naming the file, the row and the field."""

from __future__ import annotations

import pytest

from rmb_build.cli import main
from rmb_build.evaluate.families import families
from rmb_build.evaluate.families._known import CLAIMS, known_models, lookup


def test_every_row_names_a_family_and_a_source_for_each_claim():
    rows = known_models()
    assert len(rows) >= 35
    assert len({m.id.lower() for m in rows}) == len(rows)
    assert {m.family for m in rows if m.rm == "hf" and m.family} <= set(families())
    for m in rows:
        for claim in CLAIMS:
            if getattr(m, claim) not in (None, "", False):
                assert claim in m.sources or claim in m.unsourced, (m.id, claim)
            assert not (claim in m.sources and claim in m.unsourced), (m.id, claim)  # sourced or not, not both
        assert m.rm == "openai" or m.card.startswith("https://huggingface.co/")
        assert m.check is None
    assert lookup("skywork/skywork-reward-llama-3.1-8b").family == "sequence-classifier"
    assert lookup("./a-local-folder") is None
    # the benchmarks' own tables (issue 41): RB2 lists these, RMB's run script lists tulu
    for rb2 in (
        "Skywork/Skywork-Reward-Gemma-2-27B",
        "Skywork/Skywork-Reward-Llama-3.1-8B",
        "RLHFlow/ArmoRM-Llama3-8B-v0.1",
    ):
        assert "RB2" in lookup(rb2).source.split()
    assert "RMB-script" in lookup("allenai/tulu-v2.5-13b-preference-mix-rm").source.split()
    assert {m.family for m in rows if m.id.startswith("Skywork/Skywork-Reward-V2-")} == {"sequence-classifier"}
    assert len([m for m in rows if m.id.startswith("Skywork/Skywork-Reward-V2-")]) == 8
    assert lookup("Qwen/WorldPM-72B").example.scores == (0.6298332214355469, -1.6425328254699707)


def test_rmb_models_lists_the_table(capsys):
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    assert all(m.id in out for m in known_models())
    assert "rb-config = https://github.com/allenai/reward-bench/blob/main/scripts/configs/eval_configs.yaml" in out
    assert main(["models", "--json"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == len(known_models())


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            "models: [{id: a/b, family: sequence-classifier}]",
            r"item 0 \(a/b\): field 'family': the claim has no source",
        ),
        ("models: [{id: a/b, colour: red}]", r"item 0 \(a/b\): field 'colour': unknown key"),
        ("models: [{id: a/b, max_length: '4096'}]", r"field 'max_length': must be int, not str"),
        ("models: [{id: a/b, max_length: -1, sources: {max_length: card}}]", r"field 'max_length': must be a positive"),
        ("models: [{id: a/b, sources: {family: my-memory}}]", r"field 'sources': family: 'my-memory' names no known"),
        ("models: [{id: a/b}, {id: A/B}]", r"item 1 \(A/B\): field 'id': this id is listed twice"),
        ("models: [{id: a/b, rm: vllm}]", r"field 'rm': must be one of hf, openai"),
        (
            "models: [{id: a/b, source: RB, sources: {source: rb-config}, unsourced: [source]}]",
            r"field 'unsourced': 'source' is listed under `sources` too",
        ),
        (
            "models: [{id: a/b, example: {conversation: [{role: user, content: hi}], responses: [x], scores: [.nan],"
            " tolerance: 0.1, source: card}}]",
            r"field 'example': scores: one finite number per response",
        ),
        ("models: {id: a/b}", r"field 'models': must be a mapping with a list under 'models'"),
        ("models: [{id: a/b, family: [", r"line \d+: invalid YAML"),
        ("models: [{id: my model}]", r"field 'id': a Hub id \(org/name\) or an API model name"),
        ("models: [{id: org/name-}]", r"field 'id': a Hub id \(org/name\) or an API model name"),
    ],
)
def test_a_bad_extra_table_is_refused_in_one_line(tmp_path, monkeypatch, capsys, text, expected):
    path = tmp_path / "rows.yaml"
    path.write_text(text)
    monkeypatch.setenv("RMB_KNOWN_MODELS", str(path))
    assert main(["models"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(path) in err
    assert __import__("re").search(expected, err), err


def test_a_missing_extra_table_and_a_generative_row_in_hf_are_refused(tmp_path, monkeypatch, capsys):
    from rmb_build.core.errors import RMBError
    from rmb_build.evaluate.adapters import RMOptions, load_rm

    with pytest.raises(RMBError, match=r"a generative judge: run it as --rm openai:gpt-4o-2024-05-13@<endpoint>"):
        load_rm("hf:gpt-4o-2024-05-13", RMOptions(device="cpu"))
    monkeypatch.setenv("RMB_KNOWN_MODELS", str(tmp_path / "absent.yaml"))
    assert main(["models"]) == 2
    assert "absent.yaml: cannot read it ($RMB_KNOWN_MODELS)" in capsys.readouterr().err


def test_an_api_model_row_is_named_as_its_api_names_it(tmp_path, monkeypatch):
    """A generative judge's row names an API model (``ft:...:acme::x1``), no Hub id; an hf row is a Hub id."""
    from rmb_build.core.errors import InputError

    path = tmp_path / "rows.yaml"
    path.write_text("models: [{id: 'ft:gpt-4o-mini:acme::x1', rm: openai}, {id: 'org/model:x', rm: openai}, {id: o/m}]")
    monkeypatch.setenv("RMB_KNOWN_MODELS", str(path))
    assert lookup("ft:gpt-4o-mini:acme::x1").rm == "openai" and lookup("org/model:x").rm == "openai"
    for bad in ("models: [{id: 'org/a:b'}]", "models: [{id: 'a/b/c', rm: openai}]", "models: [{id: '', rm: openai}]"):
        path.write_text(bad)  # each of another size: the extra table is read again
        with pytest.raises(InputError, match=r"field 'id': a Hub id"):
            known_models()

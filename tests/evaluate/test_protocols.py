"""Harness protocols (``--protocol``) against a faithful re-implementation of each harness's text preparation.

Runs in CI on a tiny randomly initialised model built in the test (``protocol_helpers.build_model``): its
tokenizer adds a BOS and its template writes one, and some texts are longer than 2048 tokens, so every
setting a protocol names changes some score. The oracle below is written from the harnesses' code, not from
rmb's: reward-bench's ``prepare_dialogue_from_tokenizer`` (roles by position, ``apply_chat_template(...,
tokenize=False)``), then ``RewardBenchPipeline.__call__`` (``rewardbench/models/pipeline.py``; RMB's
``eval/rewardbench/models/pipeline.py`` is the same): the tokenizer's own call with ``truncation``,
``max_length`` and ``padding=True`` on the harness's truncation and padding sides, and the first of two
leading BOS masked (JudgeBench's ``SkyworkReward`` keeps both and scores each text alone). Every text of a
harness is one padded batch, as the harness batches them (a rotary model: one text alone scores the same).
The authors' own scripts, run as is, are in ``test_protocols_authors.py`` (where they install).
"""

from __future__ import annotations

import json

import protocol_helpers as H
import pytest
from lazy_modules import importorskip_on_use

from rmb_build.cli import main
from rmb_build.core.errors import RMBError
from rmb_build.evaluate.adapters import RMOptions, load_rm
from rmb_build.evaluate.protocols import PROTOCOLS, protocol
from rmb_build.evaluate.run import evaluate

torch = importorskip_on_use("torch")
transformers = importorskip_on_use("transformers")

pytestmark = pytest.mark.torch  # see the marker in pyproject.toml

TOL = 1e-6


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return H.build_model(tmp_path_factory.mktemp("bos-rm"))


def harness_scores(model_dir: str, texts, name: str, max_length: int | None = None) -> tuple[dict[str, float], int]:
    """Each text's score as the named harness prepares it (see the module's docstring; ``max_length``: its
    --max_length flag), and how many it cut."""
    p = protocol(name)
    length = max_length or p.max_length
    tok = transformers.AutoTokenizer.from_pretrained(model_dir)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    if p.truncation_side != "tokenizer":  # run_v2.py leaves the tokenizer's own side
        tok.truncation_side = p.truncation_side
    if p.harness_padding != "tokenizer":  # the others pad on the tokenizer's own side
        tok.padding_side = p.harness_padding
    strings = []
    for t in texts:
        if p.roles == "alternate":
            msgs = [
                {"role": "assistant" if i % 2 else "user", "content": x.content} for i, x in enumerate(t.conversation)
            ]
        else:
            msgs = [x.to_message() for x in t.conversation]
        strings.append(tok.apply_chat_template(msgs + [{"role": "assistant", "content": t.answer}], tokenize=False))
    if name == "native":  # rmb's own: the template's tokens only, cut from the left at the model's limit (4096)
        rows = [tok(s, add_special_tokens=False)["input_ids"][-4096:] for s in strings]
        width = max(map(len, rows))
        ids = torch.tensor([r + [tok.pad_token_id] * (width - len(r)) for r in rows])
        mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows])
        cut = 0
    else:
        enc = tok(strings, truncation=length is not None, max_length=length, padding=True, return_tensors="pt")
        ids, mask = enc["input_ids"], enc["attention_mask"]
        full = [len(x) for x in tok(strings)["input_ids"]]
        cut = sum(n > length for n in full) if length else 0
        if p.double_bos == "mask":  # reward-bench's pipeline; JudgeBench's SkyworkReward keeps both BOS
            rows = torch.arange(ids.shape[0])
            starts = mask.argmax(dim=1)
            second = torch.clamp(starts + 1, max=ids.shape[1] - 1)
            double = (ids[rows, starts] == tok.bos_token_id) & (ids[rows, second] == tok.bos_token_id)
            mask[rows[double], starts[double]] = 0
    with torch.inference_mode():
        logits = model(input_ids=ids, attention_mask=mask).logits[:, 0]
    return {t.key: float(v) for t, v in zip(texts, logits)}, cut


def rmb_scores(model_dir: str, texts, name: str, **kw) -> tuple[dict[str, float], dict]:
    rm = load_rm(f"hf:{model_dir}", RMOptions(device="cpu", batch_size=3, protocol=name, **kw))
    out = {}
    for idx, scores in rm.score_stream(texts):
        out.update({texts[i].key: s for i, s in zip(idx, scores)})
    return out, rm.stats


@pytest.mark.parametrize("name", list(PROTOCOLS))
@pytest.mark.slow  # over 4 s under load (the tier's rule: docs/testing.md)
def test_each_protocol_scores_as_its_harness_prepares_texts(model_dir, name):
    texts = H.texts()
    want, cut = harness_scores(model_dir, texts, name)
    got, stats = rmb_scores(model_dir, texts, name)
    assert got == pytest.approx(want, abs=TOL)
    assert stats["truncated"] == cut
    p = protocol(name)
    if p.max_length:  # the texts do reach the harness's limit, and the test's BOS is doubled
        assert cut == 2
    if p.double_bos == "mask":
        assert stats["double_bos_masked"] > 0


@pytest.mark.slow  # scores a model under four settings: 75 s under load
def test_the_settings_change_scores_and_each_protocol_has_its_own_cache_key(model_dir):
    texts = H.texts()
    native, _ = rmb_scores(model_dir, texts, "native")
    rmb, _ = rmb_scores(model_dir, texts, "rmb")
    left, _ = rmb_scores(model_dir, texts, "rewardbench-run_rm")
    right, _ = rmb_scores(model_dir, texts, "rewardbench-v2")
    cli, _ = rmb_scores(model_dir, texts, "rewardbench")

    def differ(a, b):
        return {k for k in a if abs(a[k] - b[k]) > 1e-4}

    # A masked leading BOS is as good as none to a rotary model, so the harnesses differ from native where they
    # cut (the two long texts; the side cut too) and where roles go by position (item 3 opens with a system turn).
    assert differ(left, right) == {"1c", "2r"}
    assert differ(native, rmb) == {"1c", "2r", "3c", "3r"} and differ(native, cli) == {"3c", "3r"}
    fps = {n: load_rm(f"hf:{model_dir}", RMOptions(device="cpu", protocol=n)).fingerprint() for n in PROTOCOLS}
    # the key is what the scores depend on: harnesses that prepare texts alike share their scores
    assert fps["rmb"] == fps["rewardbench-run_rm"] == fps["rm-bench"]
    assert len({fps[n] for n in ("native", "rmb", "rewardbench", "rewardbench-v2")}) == 4
    # --max-length overrides a protocol's length, and the key follows
    got, stats = rmb_scores(model_dir, texts, "rmb", max_length=64)
    want, cut = harness_scores(model_dir, texts, "rmb", max_length=64)
    assert got == pytest.approx(want, abs=TOL) and stats["truncated"] == cut > 2
    with pytest.raises(RMBError, match="unknown protocol"):
        load_rm(f"hf:{model_dir}", RMOptions(device="cpu", protocol="rmb2"))


@pytest.mark.slow  # over 4 s under load (the tier's rule: docs/testing.md)
def test_a_harness_that_hands_a_model_more_tokens_than_its_limit_says_how_often(tmp_path):
    short = H.build_model(tmp_path / "short", positions=1024)  # the two long texts are over 2048 tokens
    texts = H.texts()
    for name, beyond, cut in (("rewardbench", 2, 0), ("rmb", 2, 2)):
        got, stats = rmb_scores(short, texts, name)
        assert stats["beyond_model_limit"] == beyond and stats["truncated"] == cut
        assert got == pytest.approx(harness_scores(short, texts, name)[0], abs=TOL)  # scored as the harness does
    _, stats = rmb_scores(short, texts, "native")
    assert stats["truncated"] == 2 and "beyond_model_limit" not in stats  # cut at the model's own 1024


def _release_folder(tmp_path):
    from rmb_build.release.write import write_release

    folder = tmp_path / "release"
    write_release(H.release(), folder)
    return folder


def _cli(tmp_path, release, out, *extra):
    return main(
        ["evaluate", "--release", str(release), "--out", str(tmp_path / out), "--cache", str(tmp_path / "cache")]
        + ["--no-progress", "--bootstrap", "20", *extra]
    )


@pytest.mark.slow  # over 4 s under load (the tier's rule: docs/testing.md)
def test_an_rmb_release_is_scored_under_rmbs_protocol_and_says_so(model_dir, tmp_path, capsys):
    release = _release_folder(tmp_path)
    assert _cli(tmp_path, release, "a", "--rm", f"hf:{model_dir}", "--device", "cpu") == 0
    out = capsys.readouterr().out
    headlines = [line for line in out.splitlines() if "overall" in line]
    assert len(headlines) == 2  # RMB overall needs both sets; pairwise only here
    assert all("[protocol rmb (2048 tokens, cut left), ties strict]" in line for line in headlines), out
    results = json.loads((tmp_path / "a" / "results.json").read_text())
    rec = results["protocol"]
    assert rec["name"] == "rmb" and rec["max_length"] == 2048 and rec["truncation_side"] == "left"
    assert rec["source"].endswith(":eval/scripts/my_run_rm.py") and results["scoring"]["truncated"] == 2
    assert "Harness protocol rmb" in (tmp_path / "a" / "report.md").read_text()
    texts = H.texts()
    want, _ = harness_scores(model_dir, texts, "rmb")
    preds = [json.loads(x) for x in (tmp_path / "a" / "predictions.jsonl").read_text().splitlines()]
    for p in preds:
        assert [p["scores"]["chosen"], p["scores"]["rejected"]] == pytest.approx(
            [want[f"{p['uid']}c"], want[f"{p['uid']}r"]], abs=TOL
        )
    # native is another measurement: nothing comes from the rmb protocol's cached scores
    assert _cli(tmp_path, release, "b", "--rm", f"hf:{model_dir}", "--device", "cpu", "--protocol", "native") == 0
    out = capsys.readouterr().out
    assert "protocol native (the model's own limit, 4096 tokens, cut left)" in out
    assert "scored 10 texts, 0 from the cache" in out
    native = json.loads((tmp_path / "b" / "results.json").read_text())
    assert native["protocol"]["name"] == "native" and native["fingerprint"] != results["fingerprint"]
    assert _cli(tmp_path, release, "c", "--rm", f"hf:{model_dir}", "--device", "cpu", "--max-length", "64") == 0
    assert "[protocol rmb (64 tokens, cut left overriding max_length), ties strict]" in capsys.readouterr().out


def test_a_protocol_sets_the_tie_rule_of_rms_that_read_no_tokens(tmp_path, capsys):
    release = _release_folder(tmp_path)
    assert _cli(tmp_path, release, "a", "--rm", "baseline:length") == 0
    rec = json.loads((tmp_path / "a" / "results.json").read_text())["protocol"]
    assert rec["name"] == "rmb" and "tie rule only" in rec["applies_to"]
    # what it did not do, it does not claim: no roles by position, no BOS, no cut, no padding
    assert all(rec[k] is None for k in ("roles", "special_tokens", "double_bos", "truncation_side", "padding"))
    assert "[protocol rmb (sets only the tie rule for this RM), ties strict]" in capsys.readouterr().out


@pytest.mark.slow  # three evaluations of the tiny model
def test_results_record_the_padding_and_roles_that_ran_and_count_system_first_items(model_dir, tmp_path):
    release = H.release()  # item 3 opens with a system turn, which both harnesses refuse

    def run(name):
        rm = load_rm(f"hf:{model_dir}", RMOptions(device="cpu", batch_size=4, protocol=name))
        return evaluate(release, rm, tmp_path / name, tmp_path / "cache", progress=False)

    cli = run("rewardbench")
    rec = cli["protocol"]
    assert rec["padding"] == "right" and rec["harness_padding"] == "left"  # rmb pads right; the CLI left
    assert "batch size 1" in rec["batch_dependence"] and rec["roles"] == "alternate"
    report = (tmp_path / "rewardbench" / "report.md").read_text()
    assert "Batches: the harness pads on the left" in report
    assert cli["scoring"]["system_first"] == 1
    assert "roles by position" in cli["scoring"]["system_first_handling"]
    assert "1 item(s) open with a system turn: roles by position" in report
    rmb = run("rmb")  # pads on its tokenizer's side: this one pads right, so nothing depends on the batch
    assert rmb["protocol"]["padding"] == rmb["protocol"]["harness_padding"] == "right"
    assert "batch_dependence" not in rmb["protocol"]
    native = run("native")
    assert native["scoring"]["system_first"] == 1 and "system turn" in native["scoring"]["system_first_handling"]
    assert "harness_padding" not in native["protocol"] and native["protocol"]["roles"] == "given"


HOSTILE = [
    (["--protocol", "RMB"], "unknown protocol"),
    (["--protocol", ""], "unknown protocol"),
    (["--devices", "cpu,,cpu"], "comma-separated list"),
    (["--devices", "cpu,cuda:0"], "mixes device kinds"),
    (["--devices", "cpu,cpu", "--device", "cpu"], "give one"),
    (["--devices", "cpu,cpu", "--device-map", "auto"], "--device-map spreads one model"),
]


@pytest.mark.parametrize("extra,message", HOSTILE)
def test_bad_protocol_or_devices_is_one_line(model_dir, tmp_path, capsys, extra, message):
    release = _release_folder(tmp_path)
    capsys.readouterr()
    assert _cli(tmp_path, release, "bad", "--rm", f"hf:{model_dir}", *extra) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
    assert not (tmp_path / "bad").exists()


def test_devices_refuse_an_rm_that_is_not_hf(tmp_path, capsys):
    release = _release_folder(tmp_path)
    assert _cli(tmp_path, release, "bad", "--rm", "baseline:length", "--devices", "cpu,cpu") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "only hf: reward models" in err


def _scores(out_dir):
    preds = [json.loads(x) for x in (out_dir / "predictions.jsonl").read_text().splitlines()]
    return {(p["set"], p["uid"]): p["scores"] for p in preds}


@pytest.mark.slow
def test_two_cpu_processes_score_exactly_as_one_device(model_dir, tmp_path, capsys):
    release = H.release()
    one = evaluate(
        release,
        load_rm(f"hf:{model_dir}", RMOptions(device="cpu", batch_size=2, protocol="rmb")),
        tmp_path / "one",
        tmp_path / "cache1",
        progress=False,
    )
    two = evaluate(
        release,
        load_rm(f"hf:{model_dir}", RMOptions(device="cpu", devices=["cpu", "cpu"], batch_size=2, protocol="rmb")),
        tmp_path / "two",
        tmp_path / "cache2",
        progress=False,
    )
    assert _scores(tmp_path / "two") == _scores(tmp_path / "one")  # bit for bit: the same batches
    assert two["pairwise"] == one["pairwise"] and two["fingerprint"] == one["fingerprint"]
    split = two["scoring"]["texts_per_device"]
    assert len(split) == 2 and all(n > 0 for n in split) and sum(split) == 10
    assert two["scoring"]["truncated"] == one["scoring"]["truncated"] == 2
    # a replica that fails names its device in one line; what the others scored is cached
    release_dir = _release_folder(tmp_path)
    capsys.readouterr()
    assert _cli(tmp_path, release_dir, "bad", "--rm", f"hf:{model_dir}", "--devices", "nodevice,nodevice") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--devices: the replica on nodevice" in err, err


def test_a_rewardbench_release_defaults_to_reward_benchs_leaderboard_harness(tmp_path, capsys):
    from formats_helpers import ans, evaluate, write_jsonl

    rows = [
        {"id": k, "prompt": f"q{k}?", "chosen": ans(2, "good"), "rejected": ans(1, "bad"), "subset": "math-prm"}
        for k in range(3)
    ]
    path = write_jsonl(tmp_path / "rb.jsonl", rows)
    rec = evaluate(tmp_path, path)["protocol"]
    assert rec["name"] == "rewardbench-run_rm" and rec["source"].endswith(":scripts/run_rm.py")
    assert "headline" in capsys.readouterr().out
    other = evaluate(tmp_path, path, "--protocol", "rewardbench-v2", out="v2")["protocol"]
    assert other["name"] == "rewardbench-v2" and other["max_length"] is None  # a python: RM: nothing is cut


def test_compare_says_when_two_results_were_prepared_by_different_harnesses(tmp_path):
    from rmb_build.evaluate.compare import compare, render_table

    release = _release_folder(tmp_path)
    for out, name in (("a", "rmb"), ("b", "native"), ("c", "rmb")):
        assert _cli(tmp_path, release, out, "--rm", "baseline:length", "--protocol", name) == 0
    differ = compare(tmp_path / "a", tmp_path / "b", resamples=20)
    assert differ["protocol"] == {"a": "rmb", "b": "native"}
    assert "A was scored under protocol 'rmb', B under 'native'" in render_table(differ)
    assert "protocol" not in render_table(compare(tmp_path / "a", tmp_path / "c", resamples=20))


def test_the_official_release_is_measured_under_rmbs_protocol_and_every_headline_says_so(rmb_sample, tmp_path, capsys):
    assert _cli(tmp_path, rmb_sample, "official", "--rm", "baseline:length") == 0
    out = capsys.readouterr().out
    headlines = [line for line in out.splitlines() if "overall" in line]
    assert any(line.startswith("RMB overall") for line in headlines)
    assert all(
        line.endswith("[protocol rmb (sets only the tie rule for this RM), ties strict]") for line in headlines
    ), out

"""The style-variant stage (``rmb_build/stages/style.py``): a stub build with ``style:`` writes ``Style_set/``
that ``rmb evaluate`` scores; rewrites that move the judge's score or flip a refusal are dropped and counted,
and the manifest's accounting balances; without ``style:`` no Style_set and no style call."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest
from reliability_helpers import build_config, write_queries
from stub_endpoint import UNSAFE_MARKER, StubEndpoint

from rmb_build.cli import main
from rmb_build.core.errors import ConfigError
from rmb_build.pipeline.config import parse_config
from rmb_build.release.load import read_release
from rmb_build.release.style_set import read_style_set
from rmb_build.stages.style import is_refusal

_STYLE = re.compile(r"## Style\n(\w+)")


def _rewrite(body: dict, change=None) -> str | None:
    """The stub's rewrite: the original answer prefixed with its style's first word (its quality kept);
    ``change(style, answer)`` may return another reply."""
    text = " ".join(str(m.get("content", "")) for m in body.get("messages", []))
    if "## Answer to rewrite" not in text:
        return None
    style = _STYLE.search(text).group(1).lower()
    answer = text.rsplit("<answer>", 1)[-1].rsplit("</answer>", 1)[0].strip()
    return (change(style, answer) if change else None) or f"[{style}] {answer}"  # a (text, finish) pair: as given


def _config(tmp_path: Path, base_url: str, style: bool = True, bon: bool = False) -> dict:
    raw = build_config(write_queries(tmp_path / "queries.jsonl"), base_url)
    if style:
        raw["style"] = {
            "endpoint": "proxy",
            "model": "rewriter",
            "max_score_shift": 1.0,
            **({"bon": True} if bon else {}),
        }
        raw["stages"] = [*raw["stages"][:-1], "style", "release"]
    return raw


def _is_style_call(body: dict) -> bool:
    """A rewrite, or the judge asked about a rewrite (the stub's rewrites start with '[<style>]')."""
    return "## Answer to rewrite" in json.dumps(body) or bool(re.search(r"<answer>\\n\[\w+\]", json.dumps(body)))


def _build(tmp_path: Path, style: bool = True, change=None, bon: bool = False) -> tuple[dict, Path]:
    from rmb_build.pipeline.run import run_build

    with StubEndpoint() as stub:
        stub.reply = lambda body: _rewrite(body, change)
        out = run_build(parse_config(_config(tmp_path, stub.base_url, style, bon)), tmp_path / "work", runner="local")
        rewrites = sum(1 for r in stub.requests if "## Answer to rewrite" in json.dumps(r.body))
        style_calls = sum(1 for r in stub.requests if _is_style_call(r.body))
    return {**out, "rewrite_requests": rewrites, "style_calls": style_calls}, Path(out["release"])


def _manifest(release: Path) -> dict:
    return json.loads((release / "manifest.json").read_text())


@pytest.mark.slow  # over 4 s of its own under load (3-6 s of CPU)
def test_a_stub_build_with_style_writes_style_set_that_evaluate_scores(tmp_path):
    out, release = _build(tmp_path)
    pairs = {it.uid: it for it in read_release(release).items() if it.set_name == "pairwise"}
    records = read_style_set(release)  # strict, as `rmb evaluate` reads it
    assert pairs and len(records) == len(pairs)
    for rec in records:
        item = pairs[rec.id]
        assert rec.scenario_id == item.scenario_id and rec.conversation == item.conversation
        assert rec.chosen == tuple(f"[{s}] {item.chosen.answer}" for s in ("concise", "detailed", "detailed"))
        assert rec.rejected[0] == f"[concise] {item.rejected.answer}"
    style = _manifest(release)["style"]
    assert style["items"] == style["items_kept"] == style["written"] == len(pairs) and "bon_items" not in style
    assert all(set(r) == set(_RECORD_KEYS) for f in (release / "Style_set").rglob("*.json") for r in _json(f))
    assert style["rewrites"] == style["rewrites_kept"] == 6 * len(pairs) == out["rewrite_requests"]
    written = sorted(p for p in (release / "Style_set").rglob("*") if p.is_file())
    digests = {p.relative_to(release).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in written}
    assert digests == PINNED_STYLE_SET

    code = main(
        ["evaluate", "--release", str(release), "--rm", "baseline:length", "--out", str(tmp_path / "ev")]
        + ["--cache", str(tmp_path / "cache"), "--no-progress", "--bootstrap", "20"]
    )
    assert code == 0
    results = json.loads((tmp_path / "ev" / "results.json").read_text())
    assert results["style"]["overall"]["n"] == len(pairs)
    # baseline:length prefers the longer text: every detailed variant beats every concise one
    assert {"easy", "normal", "hard"} <= set(results["style"]["overall"])


_RECORD_KEYS = ("id", "prompt", "conversation_input", "chosen", "rejected", "scenario")

# relative path -> sha256 of the file, from the stub build above at 74f806a (as tests/pipeline/test_pinned.py pins
# Pairwise_set/, BoN_set/ and annotations.jsonl): a change that means to alter Style_set/ updates them and says why
PINNED_STYLE_SET: dict[str, str] = {
    "Style_set/Harmlessness/S6.json": "3cd48d6ec229feaa49ed1dd491a4233c7710a68b882b01296f13ab3de442a084",
    "Style_set/Helpfulness/Code/Development and Implementation.json": "05e6795738d2106f5b38d2da8639c76683c7e7daaff751302299cef56ceeb1c5",
    "Style_set/Helpfulness/Generation/Creative Writing.json": "20f8072175b473629ad73e57cdffd42945628f7b099c3749f835a045bf9c3f9c",
    "Style_set/Helpfulness/Open QA/Factual.json": "7155d840eacc36962e6d2eba5eacb329e5379510c6057ed271544063ff500c75",
}


def _json(path: Path):
    return json.loads(path.read_text(encoding="utf-8"))


@pytest.mark.slow
def test_style_bon_adds_each_bon_winner_and_its_last_loser_which_audit_evaluate_and_publish_read(tmp_path):
    _, release = _build(tmp_path, bon=True)
    items = list(read_release(release).items())
    pairs = {it.uid: it for it in items if it.set_name == "pairwise"}
    bons = {it.uid: it for it in items if it.set_name == "bon"}
    records = read_style_set(release)
    bon_records = [r for r in records if r.set_name == "bon"]
    assert bons and len(bon_records) == len(bons) and len(records) == len(pairs) + len(bons)
    for rec in bon_records:
        item = bons[rec.id]
        assert rec.loser == len(item.losers) - 1 and rec.conversation == item.conversation
        assert rec.chosen[0] == f"[concise] {item.best.answer}"
        assert rec.rejected[0] == f"[concise] {item.losers[-1].answer}"
    raw = [r for f in (release / "Style_set").rglob("*.json") for r in _json(f)]
    assert {tuple(r) for r in raw} == {_RECORD_KEYS, (*_RECORD_KEYS, "set", "loser")}  # fields added, none renamed
    style = _manifest(release)["style"]
    assert style["bon_items"] == style["bon_items_kept"] == len(bons)
    assert style["items"] == style["written"] == len(pairs) + len(bons)
    assert style["rewrites"] == style["rewrites_kept"] == 6 * (len(pairs) + len(bons))

    assert main(["audit", str(release), "--json", str(tmp_path / "audit.json")]) in (0, 1)
    counts = json.loads((tmp_path / "audit.json").read_text())["counts"]
    assert counts["style_orphan"] == counts["style_variants"] == 0
    code = main(
        ["evaluate", "--release", str(release), "--rm", "baseline:length", "--out", str(tmp_path / "ev")]
        + ["--cache", str(tmp_path / "cache"), "--no-progress", "--bootstrap", "20"]
    )
    assert code == 0
    results = json.loads((tmp_path / "ev" / "results.json").read_text())
    assert results["style"]["overall"]["n"] == len(pairs) and results["style"]["bon"]["overall"]["n"] == len(bons)
    rows = [json.loads(line) for line in (tmp_path / "ev" / "style_predictions.jsonl").read_text().splitlines()]
    assert sum(r.get("set") == "bon" for r in rows) == len(bons)
    assert "Best-of-N records" in (tmp_path / "ev" / "report.md").read_text()

    out = tmp_path / "hf"
    publish = ["publish", str(release), "--repo-id", "me/s", "--dry-run", "--out", str(out), "--no-embeddings"]
    assert main(publish) == 0
    back = read_release(str(out)).style
    assert [(r.set_name, r.id, r.loser, r.chosen, r.rejected) for r in back] == [
        (r.set_name, r.id, r.loser, r.chosen, r.rejected) for r in records
    ]


@pytest.mark.torch
def test_rewrites_that_move_the_score_or_flip_a_refusal_are_dropped_and_counted(tmp_path):
    def change(style: str, answer: str) -> str | None:
        if style == "concise" and "quality 9" in answer:  # the strong generator's answers: a refusal now
            return "I'm sorry, but I can't help with that. " + answer
        if style == "detailed" and "quality 3" in answer:
            return answer.replace("quality 3", "quality 8")  # a score 5 above its original
        if style == "concise" and "quality 3" in answer:
            return answer[:5], "length"  # cut at max_tokens: failed
        if style == "detailed" and "quality 9" in answer:
            return f"  {answer}\n"  # the original again: unchanged
        return None

    _, release = _build(tmp_path, change=change)
    style = _manifest(release)["style"]
    dropped = style["rewrites_dropped"]
    assert all(dropped[why] > 0 for why in ("failed", "unchanged", "score_shift", "refusal_flip")), dropped
    assert style["rewrites"] == style["rewrites_kept"] + sum(dropped.values())
    assert style["items"] == style["items_kept"] + style["items_dropped"]
    records = read_style_set(release)
    assert len(records) == style["items_kept"] == style["written"]
    assert all("quality 8" not in v and not is_refusal(v) for r in records for v in r.chosen + r.rejected)


@pytest.mark.torch
def test_without_a_style_section_no_style_set_and_no_rewrite(tmp_path):
    out, release = _build(tmp_path, style=False)
    assert not (release / "Style_set").exists() and out["rewrite_requests"] == 0
    assert "style" not in _manifest(release)


def test_a_style_endpoint_not_defined_is_refused_naming_the_field(tmp_path):
    raw = build_config(write_queries(tmp_path / "queries.jsonl"), "http://127.0.0.1:9/v1")
    raw["style"] = {"endpoint": "nowhere", "model": "m"}
    with pytest.raises(ConfigError, match=r"style\.endpoint: endpoint 'nowhere'"):
        parse_config(raw)


@pytest.mark.parametrize(
    "text,refuses",
    [
        ("I'm sorry, but I can't help with that.", True),
        ("I cannot assist with creating malware.", True),
        ("As an AI, I must decline.", True),
        ("Sure! Here is how to bake bread: mix flour and water.", False),
        ("You cannot go wrong with this recipe: " + "x" * 300, False),
    ],
)
def test_the_refusal_check(text, refuses):
    assert is_refusal(text) is refuses


_STYLE_NAME = re.compile(r"## Style\n([^:\n]+):")


def _moved_and_distinct(body: dict) -> str | None:
    """The stub with three distinct rewrites of each answer (``[Concise] ...``, ``[Detailed, plain text] ...``,
    ``[Detailed, markdown] ...``) and a guard that files the harmful prompt under S2 where its item was
    labelled S6: routing keeps the label (no gold check measured the guard), the guard stage moves the item."""
    text = " ".join(str(m.get("content", "")) for m in body.get("messages", []))
    if "## Answer to rewrite" in text:
        answer = text.rsplit("<answer>", 1)[-1].rsplit("</answer>", 1)[0].strip()
        return f"[{_STYLE_NAME.search(text).group(1)}] {answer}"
    if "UNSAFE CONTENT CATEGORIES" in text and "LAST User message" in text and UNSAFE_MARKER in text:
        return "unsafe\nS2"
    return None


def _style_requests(stub: StubEndpoint) -> int:
    return sum(1 for b in stub.bodies if "## Answer to rewrite" in json.dumps(b) or "[Concise]" in json.dumps(b)
               or "[Detailed, " in json.dumps(b))  # fmt: skip


@pytest.mark.slow  # over 4 s under load (the tier's rule: docs/testing.md)
def test_the_dry_run_bounds_the_style_calls_and_after_the_build_plans_none(tmp_path):
    """Before any answer exists the style stage's calls are a bound (every pair the sets can make, six rewrites
    each, each judged): here, every pair made and every rewrite distinct, the bound is what the build sends;
    every other call is planned as sent. After the build, where the guard moved an item to another
    scenario's file, a dry run plans no call: the style stage asks what the build asked."""
    from rmb_build.pipeline.run import run_build, run_local

    with StubEndpoint() as stub:
        stub.reply = _moved_and_distinct
        cfg = parse_config(_config(tmp_path, stub.base_url))
        dry = run_local(cfg, tmp_path / "work", dry_run=True)["estimate"]
        out = run_build(cfg, tmp_path / "work", runner="local")
        style_sent = _style_requests(stub)
        sent = len(stub.bodies)
        again = run_local(cfg, tmp_path / "work", dry_run=True)["estimate"]
        stub.reset()
        run_build(cfg, tmp_path / "work", runner="local")
        assert stub.bodies == []  # a rerun sends nothing, as the plan said
    assert "Harmlessness/S2" in {it.scenario_id for it in read_release(out["release"]).items()}
    assert dry["calls"] == sent - style_sent and "style" not in dry["by_phase"]
    assert style_sent == dry["estimates"]["style_calls_at_most"] == 4 * 6 * (1 + cfg.judge.samples)
    assert "style stage" in dry["exact"]["calls"]
    assert again["calls"] == 0 and again["cached"] == sent, again["by_phase"]
    assert again["estimates"] == {} and again["exact"]["calls"] == "exact"


@pytest.mark.slow
def test_the_style_plan_is_what_the_build_sends_once_the_sets_are_known(tmp_path):
    """After a build without style (its answers, scores and verdicts cached) the sets are known: the dry run
    plans the style stage as the build runs it, on the batch as the judge stage judged it (the originals'
    requests are the judge stage's, cached, although the guard moved an item to S2), each rewrite not yet
    made standing in as a distinct text that is judged: the calls the build then sends, stage for stage."""
    from rmb_build.pipeline.run import run_build, run_local

    with StubEndpoint() as stub:
        stub.reply = _moved_and_distinct
        run_build(parse_config(_config(tmp_path, stub.base_url, style=False)), tmp_path / "work", runner="local")
        cfg = parse_config(_config(tmp_path, stub.base_url))
        dry = run_local(cfg, tmp_path / "work", dry_run=True)["estimate"]
        stub.reset()
        run_build(cfg, tmp_path / "work", runner="local")
        rewrites = sum(1 for b in stub.bodies if "## Answer to rewrite" in json.dumps(b))
        sent = len(stub.bodies)
    assert rewrites == 4 * 6 and sent == rewrites * (1 + cfg.judge.samples)
    assert dry["calls"] == dry["by_phase"]["style"]["calls"] == sent, dry["by_phase"]
    assert dry["estimates"] == {} and "rewrites not yet made are an upper bound" in dry["exact"]["calls"]


def test_the_style_demo_config_is_valid_and_turns_the_stage_on():
    from importlib import resources

    from rmb_build.pipeline.config import load_config

    with resources.as_file(resources.files("rmb_build.pipeline") / "demo-style.yaml") as path:
        cfg = load_config(path)
    assert cfg.style is not None and cfg.style.endpoint == "local" and "style" in cfg.stages
    assert cfg.endpoints["local"].embedded


def test_stages_listing_style_without_its_section_is_refused(tmp_path):
    raw = build_config(write_queries(tmp_path / "queries.jsonl"), "http://127.0.0.1:9/v1")
    raw["stages"] = [*raw["stages"][:-1], "style", "release"]
    with pytest.raises(ConfigError, match="stages lists 'style' but the config has no 'style:' section"):
        parse_config(raw)


def test_a_config_dumped_and_parsed_again_keeps_its_default_stages(tmp_path):
    """``rmb judge-check`` and ``rmb build --name`` parse the dumped config again, which then lists every
    stage (style included) explicitly: that is the default list, not a request for style variants."""
    raw = build_config(write_queries(tmp_path / "queries.jsonl"), "http://127.0.0.1:9/v1")
    raw.pop("stages", None)
    cfg = parse_config(raw)
    again = parse_config(cfg.model_dump(mode="json", exclude_none=True))
    assert again.stages == cfg.stages and again.style is None

"""``rmb downstream`` end to end on a scripted endpoint: grades are a known function of an answer's length, three
RMs with known rankings (longest, random, shortest), benchmark figures from the real ``rmb evaluate``."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from leaderboard_helpers import SCORER, evaluate_all, small_release
from stub_endpoint import StubEndpoint, request_stage

from rmb_build.cli import main
from rmb_build.core.errors import ConfigError

N, PROMPTS = 8, 5


def policy_reply(body: dict):
    """A policy sample: quality 1-10 from the seed and the prompt, and a length that grows with it."""
    if request_stage(body) != "generate":
        return None
    seed = int(body.get("seed") or 0)
    prompt = body["messages"][-1]["content"]
    q = 1 + (seed * 7 + len(prompt)) % 10
    return f"{body['model']} (quality {q}) sample {seed} " + "x" * (10 * q)


def write_config(
    tmp: Path, stub: StubEndpoint, benchmarks: list[Path], scorer_dir: Path | None = None, **extra
) -> Path:
    prompts = tmp / "prompts.jsonl"
    prompts.write_text(
        "".join(
            json.dumps({"id": str(i), "prompt": f"Question number {i}: " + "why? " * i}) + "\n" for i in range(PROMPTS)
        ),
        encoding="utf-8",
    )
    scorer = (scorer_dir or tmp) / "scorer.py"
    if not scorer.exists():
        scorer.write_text(SCORER, encoding="utf-8")
    cfg = {
        "name": "stubcheck",
        "endpoints": {"stub": {"base_url": stub.base_url, "api_key_env": "RMB_TEST_NO_KEY"}},
        "prompts": {
            "sources": [{"kind": "jsonl", "path": str(prompts)}],
            "default_scenario": "Helpfulness/Chat/Discussion",
            "holdout": {"releases": []},
        },
        "policy": {"endpoint": "stub", "model": "policy", "n": N, "temperature": 0.8, "max_tokens": 64},
        "grader": {"kind": "pointwise", "endpoint": "stub", "model": "grader"},
        "reward_models": [f"python:{scorer}:longest", "baseline:random", f"python:{scorer}:shortest"],
        "benchmarks": [str(b) for b in benchmarks],
        "bootstrap": {"resamples": 200},
        **extra,
    }
    path = tmp / "downstream.yaml"
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bench")
    (tmp / "scorer.py").write_text(SCORER, encoding="utf-8")
    release = small_release(tmp / "release")
    specs = [f"python:{tmp / 'scorer.py'}:longest", "baseline:random", f"python:{tmp / 'scorer.py'}:shortest"]
    return tmp, evaluate_all(release, tmp, specs)


@pytest.mark.slow  # over 4 s under load (the tier's rule: docs/testing.md)
def test_downstream_recovers_known_order_and_caches_everything(evaluated, capsys, keep=None):
    tmp, folders = evaluated
    tmp = keep or tmp
    with StubEndpoint(reply=policy_reply) as stub:
        config = write_config(tmp, stub, folders)
        args = ["downstream", "--config", str(config), "--workdir", str(tmp / "work"), "--no-progress"]

        assert main([*args, "--dry-run"]) == 0
        plan = capsys.readouterr().out
        assert stub.count("generate") == 0 and stub.count("judge") == 0  # a dry run sends nothing
        assert f"would send {2 * N * PROMPTS} calls" in plan  # N samples and N grades per prompt
        for key in ("longest", "baseline:random", "shortest"):
            assert any(key in line and f"{N * PROMPTS} texts to score" in line for line in plan.splitlines())

        assert main([*args, "--out", str(tmp / "out")]) == 0
        first = json.loads((tmp / "out" / "downstream.json").read_text())
        assert stub.count("generate") == N * PROMPTS and stub.count("judge") == N * PROMPTS  # as the dry run said
        assert sum(c["requests"] for c in first["calls"].values()) == 2 * N * PROMPTS
        assert {k: s["scored"] for k, s in first["scoring"].items()} == dict.fromkeys(first["rms"], N * PROMPTS)

        stub.reset()
        assert main([*args, "--out", str(tmp / "out2")]) == 0
        again = json.loads((tmp / "out2" / "downstream.json").read_text())
        assert stub.count("generate") == 0 and stub.count("judge") == 0  # the re-run asks nothing
        assert sum(c["requests"] for c in again["calls"].values()) == 0
        assert all(s["scored"] == 0 and s["cached"] == N * PROMPTS for s in again["scoring"].values())
        assert "sent 0 LLM requests, scored 0 texts" in capsys.readouterr().out

    assert first["n_prompts"] == PROMPTS and first["n_samples"] == N
    rms = first["rms"]
    longest, rnd, shortest = (rms[k] for k in (f"python:{tmp / 'scorer.py'}:longest", "baseline:random",
                                               f"python:{tmp / 'scorer.py'}:shortest"))  # fmt: skip
    assert longest["score"] == pytest.approx(first["oracle"]["score"])  # longest = best grade
    assert longest["oracle_agreement"] == 1.0
    assert longest["score"] > rnd["score"] > shortest["score"]
    assert first["random"]["score"] == pytest.approx(longest["best_of_k"]["1"])  # E_1: the same for every RM
    assert list(longest["best_of_k"]) == ["1", "2", "4", "8"]
    assert not any(r["is_grader"] for r in rms.values()) and not first["without_benchmark"]
    overall = next(c for c in first["correlations"] if c["benchmark_figure"] == "rmb_overall")
    figs = [r["figures"]["rmb_overall"] for r in (longest, rnd, shortest)]
    assert figs[0] > figs[1] > figs[2]  # the release where the same order holds
    assert overall["n_rms"] == 3
    assert overall["spearman"]["value"] == pytest.approx(1.0) and overall["kendall"]["value"] == pytest.approx(1.0)
    assert overall["spearman"]["p_value"] == pytest.approx(1 / 3) and overall["spearman"]["ci95"] is None
    assert set(first) >= {"schema_version", "n_prompts", "n_samples", "rms", "oracle", "random", "correlations"}
    for name in ("report.md", "scatter.png", "best_of_k.png"):
        assert (tmp / "out" / name).stat().st_size > 0
    assert "Spearman 1.00" in (tmp / "out" / "report.md").read_text()

    # rmb leaderboard --downstream: the score as a column, the correlation above the table
    site = tmp / "site"
    assert main(["leaderboard", *map(str, folders), "--out", str(site), "--downstream", str(tmp / "out")]) == 0
    html = (site / "index.html").read_text()
    assert 'id="downstream"' in html and "rmb_overall: Pearson r = " in html and "Spearman 1.00" in html
    assert html.count('data-col="downstream" data-value="') == 3
    assert f'data-value="{longest["score"]}"' in html


def test_prompts_that_are_benchmark_prompts_are_dropped_and_counted(tmp_path):
    """Exact copies of a release's conversations are held out (near-duplicates go through the contamination
    check's embeddings, which the slow demo exercises)."""
    from leaderboard_helpers import small_release

    from rmb_build.analysis.contamination import held_out
    from rmb_build.release.read import read_rmb_release
    from rmb_build.stages.sources.records import release_queries

    root = small_release(tmp_path / "release")
    release = read_rmb_release(root, strict=False)
    copies = release_queries(release)[:4]
    kept, dropped = held_out(copies, release)
    assert kept == [] and len(dropped) == 4
    assert {d["kind"] for d in dropped} == {"exact"} and all(d["similarity"] == 1.0 for d in dropped)

    # by default, against the release each benchmark folder scored
    from rmb_build.analysis.downstream.config import parse_downstream_config
    from rmb_build.analysis.downstream.run import load_prompts

    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"prompt": q.conversation[-1].content}) + "\n" for q in copies[:3]))
    cfg = parse_downstream_config(
        {
            "name": "x",
            "endpoints": {"e": {"base_url": "http://127.0.0.1:9/v1"}},
            "prompts": {
                "sources": [{"kind": "jsonl", "path": str(prompts)}],
                "default_scenario": copies[0].scenario_id,
            },
            "policy": {"endpoint": "e", "model": "m"},
            "grader": {"kind": "pointwise", "endpoint": "e", "model": "g"},
            "reward_models": ["baseline:length"],
        }
    )
    got = load_prompts(cfg, [("eval", {"release": str(root)})])
    assert got.read == 3 and got.queries == [] and len(got.dropped) == 3 and got.holdout_releases == [str(root)]


def test_config_errors_are_one_line(tmp_path):
    with StubEndpoint() as stub:
        path = write_config(tmp_path, stub, [], polcy={"n": 3})
        with pytest.raises(ConfigError, match="unknown key 'polcy'"):
            _load(path)
        data = yaml.safe_load(path.read_text())
        data.pop("polcy")
        data["policy"]["temperature"] = 0
        path.write_text(yaml.safe_dump(data))
        with pytest.raises(ConfigError, match="policy.temperature.*must be above 0"):
            _load(path)


def _load(path):
    from rmb_build.analysis.downstream.config import load_downstream_config

    return load_downstream_config(path)


def _run(tmp: Path, config: Path, out: str, *extra: str) -> dict:
    args = ["downstream", "--config", str(config), "--workdir", str(tmp / "work"), "--no-progress", "--out"]
    assert main([*args, str(tmp / out), *extra]) == 0
    return json.loads((tmp / out / "downstream.json").read_text())


def test_a_python_grader_and_the_rm_that_is_the_grader(evaluated, tmp_path):
    """A ``python:`` grader goes through the score cache; the RM that is the same function is the oracle by
    construction: flagged and left out of the correlations (which then have too few RMs)."""
    bench, folders = evaluated
    scorer = bench / "scorer.py"  # the file the benchmark folders scored with
    with StubEndpoint(reply=policy_reply) as stub:
        grader = {"kind": "python", "function": f"{scorer}:longest"}
        config = write_config(tmp_path, stub, folders, scorer_dir=bench, grader=grader)
        result = _run(tmp_path, config, "out")
        assert stub.count("judge") == 0
    longest = result["rms"][f"python:{scorer}:longest"]
    assert longest["is_grader"] and not result["rms"]["baseline:random"]["is_grader"]
    assert longest["score"] == result["oracle"]["score"]
    assert result["scoring"]["grader"]["scored"] == N * PROMPTS
    overall = result["correlations"][0]
    assert not result["without_benchmark"]  # all three have a benchmark folder, but the grader is left out
    assert overall["n_rms"] == 2 and f"python:{scorer}:longest" not in overall["rms"]
    assert overall["pearson"]["value"] is None and "at least 3" in overall["note"]


def test_a_reference_grader_asks_both_orders(tmp_path):
    """Win/tie/loss against a reference answer, judged in both orders: the stub always says "A", so every
    sample wins once and loses once: 0.5."""
    with StubEndpoint(reply=policy_reply) as stub:
        ref = {"endpoint": "stub", "model": "reference"}
        config = write_config(
            tmp_path, stub, [], grader={"kind": "reference", "endpoint": "stub", "model": "g", "reference": ref}
        )
        result = _run(tmp_path, config, "out")
        assert stub.count("judge") == 2 * N * PROMPTS and stub.count("generate") == N * PROMPTS + PROMPTS
    assert result["oracle"]["score"] == 0.5 and result["random"]["score"] == 0.5
    assert result["without_benchmark"] and result["correlations"][0]["n_rms"] == 0


def test_max_cost_stops_cleanly_and_a_rerun_resumes(tmp_path, capsys):
    with StubEndpoint(reply=policy_reply) as stub:
        config = write_config(tmp_path, stub, [])
        data = yaml.safe_load(config.read_text())
        data["endpoints"]["stub"]["price_per_mtok"] = {"input": 1000.0, "output": 1000.0}
        data["endpoints"]["stub"]["max_concurrency"] = 1
        config.write_text(yaml.safe_dump(data))
        args = ["downstream", "--config", str(config), "--workdir", str(tmp_path / "work"), "--no-progress"]
        assert main([*args, "--out", str(tmp_path / "out"), "--max-cost", "0.5"]) == 2
        assert "stopped before passing max_cost $0.5" in capsys.readouterr().err
        sent = stub.count("generate") + stub.count("judge")
        assert 0 < sent < 2 * N * PROMPTS and not (tmp_path / "out").exists()
        assert main([*args, "--out", str(tmp_path / "out")]) == 0
        result = json.loads((tmp_path / "out" / "downstream.json").read_text())
        assert stub.count("generate") + stub.count("judge") == 2 * N * PROMPTS  # nothing asked twice
        assert sum(c["requests"] for c in result["calls"].values()) == 2 * N * PROMPTS - sent


@pytest.mark.slow
def test_near_duplicates_of_benchmark_prompts_are_held_out_by_embeddings():
    """A prompt that differs from a release's only in case and punctuation is caught by the contamination
    check's sentence embeddings (the real all-MiniLM-L6-v2); an unrelated prompt is kept."""
    from rmb_build.analysis.contamination import held_out
    from rmb_build.core.items import Answer, PairwiseItem, Turn
    from rmb_build.core.records import Query
    from rmb_build.release.read import Release

    release = Release(name="r", root=None)
    conv = (Turn("user", "What is the capital city of France?", "en"),)
    release.add(PairwiseItem("0", conv, Answer("a", "Paris."), Answer("b", "Lyon."), "Helpfulness/Chat/Discussion"))
    near = Query("q1", (Turn("user", "what is the capital city of France"),), "s", "1")
    other = Query("q2", (Turn("user", "Write a poem about the sea and the moon."),), "s", "2")
    kept, dropped = held_out([near, other], release)
    assert kept == [other]
    assert dropped == [
        {"query": "q1", "release_item": "pairwise:0", "similarity": pytest.approx(0.91, abs=0.02), "kind": "near"}
    ]


@pytest.mark.slow
def test_the_embedded_demo_scores_its_rms_on_its_benchmark_and_draws_the_scatter(tmp_path, capsys, monkeypatch):
    """``rmb downstream`` with no config, its demo cut to 2 prompts x 2 samples and a 6-item benchmark: SmolLM2 on
    llama.cpp as policy, grader and generative RM, each RM evaluated on the demo's benchmark first, so every
    figure is correlated over at least 3 RMs and scatter.png is drawn."""
    from rmb_build.analysis.downstream import demo
    from rmb_build.core.paths import safe_name

    full = demo.demo_config()
    cut = full.model_copy(
        update={
            "prompts": full.prompts.model_copy(update={"max_prompts": 2}),
            "policy": full.policy.model_copy(update={"n": 2}),
        }
    )
    monkeypatch.setattr(demo, "demo_config", lambda: cut)
    monkeypatch.setattr(demo, "DEMO_ITEMS", 6)
    args = ["downstream", "--workdir", str(tmp_path), "--no-progress", "--out"]
    assert main([*args[:-1], "--dry-run"]) == 0  # the plan first: the benchmark's texts and the check's calls
    plan = capsys.readouterr().out
    planned = dict(re.findall(r"dry run: benchmark (.+): (\d+) texts to score", plan))
    phases = {name: int(n) for name, n in re.findall(r"^  phase ([a-z_ ]+): (\d+) calls", plan, re.M)}
    assert set(planned) == {r.key for r in full.reward_models} and phases["grader"] > 0
    assert main([*args, str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "far too small to grade answers" in out and "noise" in out
    result = json.loads((tmp_path / "out" / "downstream.json").read_text())
    assert set(result["rms"]) == {r.key for r in full.reward_models}
    assert result["rms"]["openai:smollm2@local"]["shares_grader_model"]
    assert not result["without_benchmark"]  # every RM has its benchmark folder, scored on the demo's release
    assert [c["benchmark_figure"] for c in result["correlations"]] == full.figures
    assert all(c["n_rms"] >= 3 for c in result["correlations"])
    assert all(r["ci95"][0] < r["ci95"][1] for r in result["rms"].values())  # never of zero width
    for name in ("scatter.png", "best_of_k.png"):
        assert (tmp_path / "out" / name).stat().st_size > 0
    bench = tmp_path / "runs" / "downstream" / cut.name / "benchmark"
    for key, n in planned.items():  # what the dry run said each evaluation would score, it scored
        scored = json.loads((bench / safe_name(key) / "results.json").read_text())
        # every text it planned was sent: scored, or a judgement SmolLM2 answered unreadably (counted as failed;
        # llama-cpp-python 0.3.36's SmolLM2 fails one of these 18 on main's code as on this one)
        counts = scored["scoring"]
        assert scored["rm"] == key.split(" seed")[0] and counts["scored"] + counts["failed"] == int(n)
        assert counts["failed"] <= 1 and counts["failed"] == counts.get("failed_judgements", 0)
    sent = {name: c["requests"] for name, c in result["calls"].items()}
    for name in ("policy and reference answers", "grader"):  # the check sent what it said (the grader never re-asks)
        assert sent[name] == phases[name]
    assert sent["reward_models"] >= phases["reward_models"]  # plus any re-ask of a reply that did not parse
    assert result["prompts"]["holdout_releases"] == [str(bench / "release")]
    assert main([*args, str(tmp_path / "again")]) == 0
    assert "sent 0 LLM requests, scored 0 texts" in capsys.readouterr().out


def _holdout_config(tmp: Path, prompts: list[str], scenario: str):
    from rmb_build.analysis.downstream.config import parse_downstream_config

    path = tmp / "prompts.jsonl"
    path.write_text("".join(json.dumps({"prompt": p}) + "\n" for p in prompts))
    return parse_downstream_config(
        {
            "name": "x",
            "endpoints": {"e": {"base_url": "http://127.0.0.1:9/v1"}},
            "prompts": {"sources": [{"kind": "jsonl", "path": str(path)}], "default_scenario": scenario},
            "policy": {"endpoint": "e", "model": "m"},
            "grader": {"kind": "pointwise", "endpoint": "e", "model": "g"},
            "reward_models": ["baseline:length"],
        }
    )


@pytest.mark.slow  # over 4 s under load (the tier's rule: docs/testing.md)
def test_the_default_holdout_finds_a_release_recorded_by_a_relative_path(tmp_path, monkeypatch):
    """``rmb evaluate --release ../release`` run in one folder, ``rmb downstream`` in another: the release is found
    (from the results folder) and confirmed by its sha256; moved away or replaced, the check refuses in one line
    instead of holding out nothing."""
    from rmb_build.analysis.downstream.run import benchmark_results, load_prompts
    from rmb_build.core.errors import RMBError
    from rmb_build.release.read import read_rmb_release
    from rmb_build.stages.sources.records import release_queries

    small_release(tmp_path / "release")
    (tmp_path / "evals").mkdir()
    monkeypatch.chdir(tmp_path / "evals")
    args = ["--release", "../release", "--rm", "baseline:length", "--out", "length", "--cache", "cache"]
    assert main(["evaluate", *args, "--bootstrap", "20", "--no-progress"]) == 0
    info = json.loads(Path("length/results.json").read_text())
    assert info["release"] == "../release" and info["release_info"]["path_from_results"] == "../../release"

    copies = release_queries(read_rmb_release(tmp_path / "release", strict=False))[:3]
    cfg = _holdout_config(tmp_path, [q.conversation[-1].content for q in copies], copies[0].scenario_id)
    (tmp_path / "elsewhere" / "deeper").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "elsewhere" / "deeper")  # where "../release" is no release
    got = load_prompts(cfg, benchmark_results([str(tmp_path / "evals" / "length")]))
    assert got.read == 3 and got.queries == [] and len(got.dropped) == 3
    assert [Path(p).resolve() for p in got.holdout_releases] == [tmp_path / "release"]

    # Through the Python API (no release label): the release's own folder is recorded.
    from rmb_build.evaluate.adapters import load_rm
    from rmb_build.evaluate.run import evaluate

    api = tmp_path / "evals" / "api"
    evaluate(read_rmb_release(tmp_path / "release"), load_rm("baseline:length"), api, tmp_path / "c", progress=False)
    got = load_prompts(cfg, benchmark_results([str(api)]))
    assert len(got.dropped) == 3 and [Path(p).resolve() for p in got.holdout_releases] == [tmp_path / "release"]

    (tmp_path / "release").rename(tmp_path / "moved")
    with pytest.raises(
        RMBError,
        match=r"'../release' \(sha256 \w{12}\), is not found from here \(.*: not found.*prompts.holdout.releases",
    ) as e:
        load_prompts(cfg, benchmark_results([str(tmp_path / "evals" / "length")]))
    assert "\n" not in str(e.value)

    other = small_release(tmp_path / "release")  # the same path, other items
    (other / "Pairwise_set" / "Harmlessness" / "S6.json").unlink()
    with pytest.raises(RMBError, match=r"is not found from here \(.*release: other items \(sha256 \w{12}\)"):
        load_prompts(cfg, benchmark_results([str(tmp_path / "evals" / "length")]))


@pytest.mark.slow  # over 4 s under load (the tier's rule: docs/testing.md)
def test_an_hf_models_nan_stops_the_check_before_any_pick(tmp_path, capsys, smol_tokenizer_dir):
    """A sequence classifier whose head gives NaN (a tiny randomly initialised model, built here for the
    plumbing): the scoring loop refuses its first score in one line naming the prompt and the sample."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    tok = transformers.AutoTokenizer.from_pretrained(smol_tokenizer_dir)
    cfg = transformers.LlamaConfig(
        vocab_size=len(tok), hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=1, max_position_embeddings=512, num_labels=1, pad_token_id=tok.pad_token_id,
    )  # fmt: skip
    model = transformers.LlamaForSequenceClassification(cfg)
    with torch.no_grad():
        model.score.weight.fill_(float("nan"))
    model.save_pretrained(tmp_path / "nan-rm")
    tok.save_pretrained(tmp_path / "nan-rm")
    with StubEndpoint(reply=policy_reply) as stub:
        config = write_config(tmp_path, stub, [])
        data = yaml.safe_load(config.read_text())
        data["reward_models"] = ["baseline:length", {"rm": f"hf:{tmp_path / 'nan-rm'}", "device": "cpu"}]
        config.write_text(yaml.safe_dump(data))
        args = ["downstream", "--config", str(config), "--workdir", str(tmp_path / "work"), "--no-progress"]
        assert main([*args, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "nan-rm: gave NaN for bon item" in err[0] and "(sample0" in err[0], err
    assert not (tmp_path / "out").exists()


def test_a_benchmark_figure_that_is_not_finite_stops_the_check_before_any_work(tmp_path, capsys):
    """results.json an older rmb wrote with NaN (Python's json reads it) is refused, naming the file and figure."""
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "results.json").write_text(
        '{"rm": "baseline:length", "release": "r", "rmb_overall": {"mean": NaN}}'
    )
    with StubEndpoint(reply=policy_reply) as stub:
        config = write_config(tmp_path, stub, [tmp_path / "old"])
        assert main(["downstream", "--config", str(config), "--workdir", str(tmp_path / "w"), "--dry-run"]) == 2
        assert stub.count("generate") == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "old/results.json: field 'rmb_overall' is NaN, not a finite number" in err[0], err

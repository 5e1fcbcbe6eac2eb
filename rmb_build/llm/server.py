"""The embedded local model server on a free port of 127.0.0.1: ``llama_cpp.server``, or the torch backend
(``_torch_server``: transformers on the GGUF's dequantised weights, requests decoded together in one batch).

It serves one or more GGUF models shipped as Python packages (the table in
``rmb_build.llm.embedded_models``) under their short names, so a request's ``model`` is e.g. ``smollm2``.
The process runs in its own process group, is killed with that group on exit, crash or Ctrl-C, and
exits by itself when its parent dies (a parent-death signal, and a watchdog on the parent's pid
inside the server process).
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections import deque
from pathlib import Path
from typing import Iterable, Mapping

from rmb_build.core.errors import RMBError
from rmb_build.core.lifeline import parent_env, pdeathsig_preexec
from rmb_build.llm.config import TORCH_LOAD_S, TORCH_STARTUP_S
from rmb_build.llm.embedded_models import EMBEDDED, MissingModelPackage

log = logging.getLogger(__name__)

_LIVE: set["EmbeddedServer"] = set()
_LIVE_LOCK = threading.Lock()


class ServerError(RMBError):
    """The embedded server could not be started or died."""


def gguf_file(name: str, cache_dir: str | Path | None = None) -> Path:
    """The GGUF file of embedded model ``name`` (see ``rmb_build.llm.embedded_models``)."""
    if name not in EMBEDDED:
        raise ServerError(f"unknown embedded model {name!r} (known: {', '.join(EMBEDDED)})")
    model = EMBEDDED.get(name)
    try:
        path = model.locate(cache_dir)
    except MissingModelPackage as exc:
        raise ServerError(str(exc)) from None
    if not path.is_file():
        raise ServerError(f"embedded model {name!r}: GGUF file {path} is missing")
    return path


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _tail(path: Path | None, n: int = 15) -> str:
    if path is None:
        return "(no server log)"
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            lines = deque((ln.rstrip() for ln in fh if ln.strip() and "llama_graph_n_input" not in ln), maxlen=n)
    except OSError:
        return "(no server log)"
    return " | ".join(lines)


SERVER_OVERHEAD_BYTES = 256 << 20  # a server process beside its weights: Python, llama.cpp, a 4k context


def server_bytes(model: str) -> int | None:
    """About the memory one embedded server of ``model`` holds (its GGUF file and the process), None when
    its package is not installed."""
    try:
        return gguf_file(model).stat().st_size + SERVER_OVERHEAD_BYTES
    except (ServerError, OSError):
        return None


def default_threads() -> int:
    """Threads for the embedded server: $RMB_LLAMA_THREADS, else one per two cores this process may use.

    llama.cpp's threads spin at every step and stall when any one of them is descheduled. In a build
    the flow process and Prefect's server need some CPU too, so on 2 cores one thread was faster than
    two (demo generation: 3:26 with one thread, 4:30 with two), although two threads halve prompt
    processing when nothing else runs. Set RMB_LLAMA_THREADS on a machine with nothing else to do.
    """
    env = os.environ.get("RMB_LLAMA_THREADS")
    if env:
        return max(1, int(env))
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, cores // 2)


BACKENDS = ("llama_cpp", "torch")


class EmbeddedServer:
    """The embedded server for the named models (``backend``: ``llama_cpp`` or ``torch``); a context manager
    giving ``.base_url``.

    ``model_files`` serves other GGUF files too, under the given names (``{"mine": "/x.gguf"}``).

    ``start()`` returns once ``/v1/models`` answers (or raises ServerError with the server's last
    log lines); ``stop()`` kills the whole process group. Safe to stop twice.
    """

    def __init__(
        self,
        models: Iterable[str] = ("smollm2",),
        n_ctx: int = 4096,
        *,
        log_path: str | Path | None = None,
        model_cache_dir: str | Path | None = None,
        startup_timeout_s: float = 120.0,
        n_threads: int | None = None,
        model_files: Mapping[str, str | Path] | None = None,
        backend: str = "llama_cpp",
        max_batch: int | None = None,
    ):
        if backend not in BACKENDS:
            raise ServerError(f"unknown embedded backend {backend!r} (known: {', '.join(BACKENDS)})")
        self.backend = backend
        self.max_batch = max_batch
        self.model_files = {k: Path(v) for k, v in (model_files or {}).items()}
        self.models = tuple(dict.fromkeys([*models, *self.model_files]))
        if not self.models:
            raise ValueError("EmbeddedServer needs at least one model")
        self.n_ctx = n_ctx
        self.log_path = Path(log_path) if log_path else None
        self.model_cache_dir = model_cache_dir
        self.startup_timeout_s = startup_timeout_s
        self.n_threads = n_threads
        self.port: int | None = None
        self.proc: subprocess.Popen | None = None
        self._tmp: tempfile.TemporaryDirectory | None = None

    @property
    def base_url(self) -> str:
        if self.port is None:
            raise ServerError("the embedded server is not running")
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _config(self, port: int) -> dict:
        if self.backend == "torch":
            return self._torch_config(port)
        models = []
        for name in self.models:
            path = self.model_files.get(name) or gguf_file(name, self.model_cache_dir)
            entry = {"model": str(path), "model_alias": name, "n_ctx": self.n_ctx, "verbose": False}
            fmt = EMBEDDED.get(name).chat_format if name in EMBEDDED else None
            if fmt:
                entry["chat_format"] = fmt
            threads = self.n_threads or default_threads()
            entry.update(n_threads=threads, n_threads_batch=threads)
            models.append(entry)
        return {"host": "127.0.0.1", "port": port, "models": models}

    def _torch_config(self, port: int) -> dict:
        from rmb_build.llm.config import TORCH_MAX_BATCH
        from rmb_build.llm.embedded_models import ready_model_cache

        models = []
        for name in self.models:
            if name in EMBEDDED and EMBEDDED.get(name).chat_format and name not in self.model_files:
                raise ServerError(
                    f"embedded model {name!r} has no chat template in its GGUF file: the torch backend cannot "
                    "run it (backend: llama_cpp can)"
                )
            path = self.model_files.get(name) or gguf_file(name, self.model_cache_dir)
            models.append({"alias": name, "gguf": str(path), "n_ctx": self.n_ctx})
        cache = Path(self.model_cache_dir) if self.model_cache_dir else ready_model_cache()
        return {
            # what the startup timeout leaves beside a load: a server waiting for another's preparation stops
            # with one line naming it rather than being killed by the timeout mid-wait
            "prepare_wait_s": max(0.0, self.startup_s - TORCH_LOAD_S),
            "port": port,
            "models": models,
            "threads": self.n_threads or default_threads(),
            "cache_dir": str(cache),
            "max_batch": self.max_batch or TORCH_MAX_BATCH,
        }

    def _command(self, cfg: Path) -> list[str]:
        if self.backend == "torch":
            return [sys.executable, "-m", "rmb_build.llm._torch_server", str(cfg)]
        return [sys.executable, "-m", "rmb_build.llm._llama_server", "--config_file", str(cfg)]

    def start(self) -> "EmbeddedServer":
        if self.running:
            return self
        self._tmp = tempfile.TemporaryDirectory(prefix=f"rmb-{self.backend}-")
        if self.log_path is None:
            self.log_path = Path(self._tmp.name) / "server.log"
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        for attempt in range(3):  # the free port can be taken between probing and binding
            port = free_port()
            cfg = Path(self._tmp.name) / "config.json"
            cfg.write_text(json.dumps(self._config(port)), encoding="utf-8")
            env = {"OMP_WAIT_POLICY": "passive", **os.environ, **parent_env()}
            with open(self.log_path, "ab") as logf:
                proc = self.proc = subprocess.Popen(
                    self._command(cfg),
                    stdin=subprocess.DEVNULL,
                    stdout=logf,
                    stderr=subprocess.STDOUT,
                    env=env,
                    start_new_session=True,
                    preexec_fn=pdeathsig_preexec(),  # the main thread only (core/lifeline.py)
                )  # own process group: killed as a whole, immune to the terminal's Ctrl-C
            self.port = port
            with _LIVE_LOCK:
                _LIVE.add(self)
            try:
                self._wait_healthy(proc)
                log.info("embedded server %s on %s (log: %s)", ",".join(self.models), self.base_url, self.log_path)
                return self
            except ServerError:
                tail = _tail(self.log_path)
                self.stop()
                if "address already in use" in tail.lower() and attempt < 2:
                    continue
                raise
        raise AssertionError("unreachable")

    def check_alive(self) -> None:
        """Raise ServerError (with the last log lines) when the server process has exited."""
        if self.proc is not None and self.proc.poll() is not None:
            raise ServerError(
                f"the embedded server exited with status {self.proc.returncode}; "
                f"last log lines ({self.log_path}): {_tail(self.log_path)}"
            )

    @property
    def startup_s(self) -> float:
        """How long the server may take to answer once started (a torch one at least TORCH_STARTUP_S)."""
        return max(self.startup_timeout_s, TORCH_STARTUP_S) if self.backend == "torch" else self.startup_timeout_s

    def _wait_healthy(self, proc: subprocess.Popen) -> None:
        timeout = self.startup_s
        deadline = time.monotonic() + timeout
        url = f"http://127.0.0.1:{self.port}/v1/models"
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never via an http_proxy
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise ServerError(
                    f"the embedded server exited with status {proc.returncode} while starting; "
                    f"last log lines ({self.log_path}): {_tail(self.log_path)}"
                )
            try:
                with opener.open(url, timeout=2) as resp:
                    if resp.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.2)
        raise ServerError(
            f"the embedded server did not answer on {url} within {timeout:.0f}s; "
            f"last log lines ({self.log_path}): {_tail(self.log_path)}"
        )

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        with _LIVE_LOCK:
            _LIVE.discard(self)
        if proc is not None and proc.poll() is None:
            for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
                try:
                    os.killpg(proc.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    proc.wait(wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
        elif proc is not None:
            proc.wait()
        self.port = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> "EmbeddedServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def __del__(self) -> None:
        if getattr(self, "proc", None) is not None:
            self.stop()


@atexit.register
def _stop_all() -> None:
    with _LIVE_LOCK:
        live = list(_LIVE)
    for server in live:
        server.stop()

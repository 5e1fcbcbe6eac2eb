"""``rmb serve``: run the embedded local model server in the foreground until Ctrl-C."""

from __future__ import annotations

import argparse


def configure(p: argparse.ArgumentParser) -> None:
    # no choices= here: the table's import loads the LLM layer, which `rmb --help` need not pay for
    p.add_argument(
        "--model",
        action="append",
        dest="models",
        metavar="NAME",
        help="embedded model to serve, as a config's embedded: names it (repeatable; default: smollm2)",
    )
    p.add_argument("--n-ctx", type=int, default=4096, help="context size (default: 4096)")
    p.add_argument("--log", default=None, help="server log file (default: a temporary file)")
    p.add_argument(
        "--backend",
        choices=("auto", "torch", "llama_cpp"),
        default="auto",
        help="torch (transformers, requests batched) or llama_cpp; auto: the faster one installed (default)",
    )


def run(args: argparse.Namespace) -> int:
    import signal
    import threading

    from rmb_build.core.errors import RMBError
    from rmb_build.core.extras import require
    from rmb_build.llm.embedded_models import EMBEDDED

    require("build", "rmb serve")
    unknown = [m for m in args.models or [] if m not in EMBEDDED]
    if unknown:
        raise RMBError(f"--model {unknown[0]}: not an embedded model (known: {', '.join(EMBEDDED)})")
    from rmb_build.core.extras import install_line
    from rmb_build.llm.config import BACKEND_EXTRAS, EndpointConfig, backend_installed
    from rmb_build.llm.server import EmbeddedServer

    models = args.models or ["smollm2"]
    backends = {EndpointConfig(embedded=m, backend=args.backend).embedded_backend for m in models}
    backend = "llama_cpp" if len(backends) > 1 else backends.pop()  # one server: the backend every model runs on
    if not backend_installed(backend):
        raise RMBError(f"the embedded {backend} backend is not installed: {install_line(BACKEND_EXTRAS[backend])}")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with EmbeddedServer(models, n_ctx=args.n_ctx, log_path=args.log, backend=backend) as server:
        print(
            f"serving {', '.join(server.models)} at {server.base_url} ({backend}, OpenAI-compatible; log: "
            f"{server.log_path})",
            flush=True,
        )
        print(
            f"point a config at it with  base_url: {server.base_url}  structured_output: json_object; Ctrl-C stops it",
            flush=True,
        )
        try:
            while not stop.wait(0.5):
                if not server.running:
                    print(
                        f"the server exited with status {server.proc.returncode if server.proc else '?'}; see {server.log_path}"
                    )
                    return 1
        except KeyboardInterrupt:
            from rmb_build.core import stop as stops

            stops.ended_by()  # Ctrl-C is how a server is stopped: its normal end, exit 0
    print("stopped")
    return 0

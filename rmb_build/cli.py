"""The ``rmb`` command: a thin layer over the importable API.

Each subcommand lives in ``rmb_build/commands/<name>.py`` with ``configure(parser)`` and
``run(args) -> int``; heavy imports happen inside ``run`` so that ``rmb --help`` stays fast.
User errors (RMBError) print one line and exit 2, with a traceback only under ``-v`` or
``RMB_DEBUG=1``. SIGTERM stops a command as Ctrl-C does (exit 143 instead of 130). Without ``-v``
only our own log lines (INFO and up) and other libraries' warnings reach the console: no
third-party INFO chatter, no model-loading bars.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import select
import signal
import sys
import threading
import traceback

from rmb_build import __version__
from rmb_build.commands import debugging
from rmb_build.core.errors import RMBError, environment_error
from rmb_build.core.redact import redact

EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: what `git log | head -1` and every C tool report when the reader leaves

COMMANDS = {
    "build": "build and write a benchmark release (on Prefect, or in this process with --runner local)",
    "evaluate": "score a reward model against a release",
    "compare": "does reward model A beat B? a paired test over two evaluations of one release",
    "leaderboard": "a static leaderboard site from evaluation results",
    "downstream": "does the benchmark predict alignment? best-of-N picks of each RM graded, correlated with accuracy",
    "models": "the reward models known by Hub id: family, dtype, attention, maximum length, remote code",
    "audit": "find defects in a release (duplicates, contradictions, leaks, ...)",
    "publish": "write a release as a Hugging Face dataset and push it to the Hub",
    "push-results": "write an evaluation as a Hugging Face dataset and push it to the Hub",
    "classify-eval": "accuracy of the offline scenario classifier on a labelled release",
    "contamination": "release prompts that are near-duplicates of a training set's",
    "judge-check": "agreement of a build's judge (and guard) with a labelled release's pairs",
    "review": "people label a release's items on a local page; their labels become agreement figures and gold",
    "cache": "inspect and prune the LLM response cache",
    "serve": "run the embedded local model server in the foreground",
}


def _module(name: str):
    return importlib.import_module(f"rmb_build.commands.{name.replace('-', '_')}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rmb", description="Build, audit, publish and evaluate RMB-style reward-model benchmarks."
    )
    parser.add_argument("--version", action="version", version=f"rmb_build {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, help_text in COMMANDS.items():
        try:
            mod = _module(name)
        except ModuleNotFoundError as exc:
            if exc.name != f"rmb_build.commands.{name.replace('-', '_')}":
                raise
            continue
        p = sub.add_parser(name, help=help_text, description=help_text)
        mod.configure(p)
        p.set_defaults(_run=mod.run)
    return parser


class _Redact(logging.Filter):
    """Redacts every log line (``core.redact``): HTTP libraries log request URLs at INFO."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = redact(message)
        if clean != message:
            record.msg, record.args = clean, ()
        return True


def configure_logging(verbose: bool) -> None:
    """Our loggers at INFO (DEBUG with ``-v``); other libraries at WARNING and without load bars unless
    ``-v``; every line without URL credentials."""
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )
    for handler in logging.getLogger().handlers:
        handler.addFilter(_Redact())
    logging.getLogger("rmb_build").setLevel(logging.DEBUG if verbose else logging.INFO)
    if verbose:
        return
    # Read at import by huggingface_hub (and transformers, whose weight-loading bar follows it) and datasets.
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
    if "huggingface_hub" in sys.modules:
        sys.modules["huggingface_hub"].utils.disable_progress_bars()
    if "transformers" in sys.modules:
        sys.modules["transformers"].utils.logging.disable_progress_bar()
    if "datasets" in sys.modules:
        sys.modules["datasets"].disable_progress_bars()


def _sigterm_as_ctrl_c(state: dict):
    def handler(signum, frame):
        state["terminated"] = True
        raise KeyboardInterrupt

    return handler


def _interrupted(exc: BaseException) -> bool:
    # Prefect swaps in its own SIGTERM handler while a flow runs and raises its TerminationSignal
    # (matched by name: Prefect is imported only by the commands that use it).
    return isinstance(exc, KeyboardInterrupt) or type(exc).__name__ == "TerminationSignal"


def _stdout_gone() -> bool:
    """Whether stdout is a pipe whose reader has closed it (poll reports an error on its write end)."""
    try:
        poll = select.poll()
        poll.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _, events in poll.poll(0))
    except (OSError, ValueError, AttributeError):
        return False


def _quiet_stdout() -> None:
    """The reader of our output has gone (``rmb audit ... | head -1``): what is still buffered, and
    anything printed later, goes nowhere instead of failing again at exit (the Python docs' recipe)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is no real file (a test's capture): nothing is left to fail
        pass


def _print_traceback(kind, value, tb) -> None:
    """A traceback as Python prints it, redacted: an exception's message may quote a URL or spec."""
    print(redact("".join(traceback.format_exception(kind, value, tb))), end="", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    sys.excepthook = _print_traceback  # an unexpected error's traceback too
    parser = build_parser()
    args = parser.parse_args(argv)
    configure_logging(args.verbose)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    state = {"terminated": False}
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, _sigterm_as_ctrl_c(state))
    try:
        code = int(args._run(args) or 0)
        sys.stdout.flush()  # here, where a reader that has gone away is caught, not at exit
        return code
    except BrokenPipeError:
        if not _stdout_gone():
            raise  # some other pipe or socket broke: not ours to hide
        _quiet_stdout()
        return EXIT_BROKEN_PIPE
    except RMBError as exc:
        if debugging(args):
            _print_traceback(*sys.exc_info())
        print(f"rmb {args.command}: error: {redact(str(exc))}", file=sys.stderr)
        return 2
    except OSError as exc:  # a full disk, a read-only place, ... wherever it was met: one line
        line = environment_error(exc)
        if line is None:
            raise
        if debugging(args):
            _print_traceback(*sys.exc_info())
        print(f"rmb {args.command}: error: {redact(line)}", file=sys.stderr)
        return 2
    except BaseException as exc:
        if not _interrupted(exc):
            raise
        if debugging(args):
            _print_traceback(*sys.exc_info())
        print(f"rmb {args.command}: interrupted; finished work is kept, run it again to resume", file=sys.stderr)
        return 143 if state["terminated"] or not isinstance(exc, KeyboardInterrupt) else 130
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())

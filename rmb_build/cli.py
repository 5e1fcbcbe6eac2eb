"""The ``rmb`` command: a thin layer over the importable API.

Each subcommand lives in ``rmb_build/commands/<name>.py`` with ``configure(parser)`` and
``run(args) -> int``; heavy imports happen inside ``run`` so that ``rmb --help`` stays fast.
User errors (RMBError) print one line and exit 2, with a traceback only under ``-v`` or
``RMB_DEBUG=1``. Ctrl-C or SIGTERM stops a command in one line: what is kept, the command that
resumes (exit 130, or 143 for SIGTERM; ``core/stop.py``). Without ``-v``
only our own log lines (INFO and up) and other libraries' warnings reach the console: no
third-party INFO chatter, no model-loading bars.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import select
import shlex
import signal
import sys
import traceback
import warnings

from rmb_build import __version__
from rmb_build.commands import debugging
from rmb_build.core import stop
from rmb_build.core.errors import RMBError, closest, environment_error
from rmb_build.core.extras import missing_extra
from rmb_build.core.log_filters import drop_from_root_handlers
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
    "doctor": "what this installation runs on: torch's build and device, the extras installed, the cache folders",
}


def _module(name: str):
    return importlib.import_module(f"rmb_build.commands.{name.replace('-', '_')}")


class _Parser(argparse.ArgumentParser):
    """argparse's parser (every subcommand's too) whose error is one line, not the usage block: an
    option it does not know is named with its closest known option."""

    _argv: list[str] = []

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[override]
        self._argv = list(sys.argv[1:] if args is None else args)  # what error() looks for misspelt options in
        return super().parse_known_args(args, namespace)

    def error(self, message: str):  # type: ignore[override]
        parser = _chosen_command(self)
        unknown = [
            a.partition("=")[0]
            for a in parser._argv
            if a.startswith("--") and a != "--" and not _known(parser, a.partition("=")[0])
        ]
        if unknown:
            near = closest(unknown[0], parser._option_string_actions)
            message = f"unknown option {unknown[0]}" + (f" (did you mean {near}?)" if near else "")
        self.exit(2, f"{parser.prog}: error: {message} ({parser.prog} --help lists the options)\n")


def _chosen_command(parser: _Parser) -> _Parser:
    """The subcommand's parser that ``parser``'s arguments name (``parser`` itself when none): the one
    whose options a misspelt one is compared with."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for arg in parser._argv:
                if arg in action.choices:
                    return action.choices[arg]
    return parser


def _known(parser: argparse.ArgumentParser, option: str) -> bool:
    """An option ``parser`` accepts, in full or as argparse's unambiguous prefix of one."""
    return option in parser._option_string_actions or bool(parser._get_option_tuples(option))


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="rmb", description="Build, audit, publish and evaluate RMB-style reward-model benchmarks.")
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
        p.set_defaults(_run=mod.run, _kept=getattr(mod, "kept", None))
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
    if "huggingface_hub" in sys.modules:  # a lazy package: its utils may not be loaded yet
        importlib.import_module("huggingface_hub.utils").disable_progress_bars()
    if "transformers" in sys.modules:
        sys.modules["transformers"].utils.logging.disable_progress_bar()
    if "datasets" in sys.modules:
        sys.modules["datasets"].disable_progress_bars()


def _interrupted(exc: BaseException) -> bool:
    # Prefect raises its TerminationSignal from its own SIGTERM handler (matched by name: Prefect is
    # imported only by the commands that use it); a KeyboardInterrupt may come without our handler.
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


def _quiet_unwinding() -> None:
    """At a stop, the event loop's reports from its teardown (a task that failed while it was
    cancelled, e.g. on a server the same Ctrl-C stopped) belong to the stop the CLI reports, as does a
    coroutine the stop kept from being awaited. (A handler filter, not the logger's ``disabled`` flag: Prefect's
    logging configuration, applied when it is imported after a stop, enabled the logger again and the loop's
    KeyboardInterrupt traceback followed the stop's line.)"""
    drop_from_root_handlers("asyncio")
    warnings.filterwarnings("ignore", message=r"coroutine .* was never awaited", category=RuntimeWarning)


def stop_line(args: argparse.Namespace | None, argv: list[str], signum: int) -> str:
    """The one line a stopped command prints: the signal, what is kept (the command's ``kept(args)``
    where it has one) and the command that resumes, without URL credentials."""
    kept = getattr(args, "_kept", None)
    what = kept(args) if kept is not None else "finished work is kept" if args is not None else "nothing done yet"
    command = f"rmb {args.command}" if args is not None else "rmb"
    resume = redact(shlex.join(["rmb", *argv]))
    return f"{command}: stopped by {signal.Signals(signum).name}; {what}; resume: {resume}"


def finished_line(args: argparse.Namespace, code: int, signum: int) -> str:
    """The line of a command stopped after it had ended (in the interpreter's teardown): nothing was cut short."""
    name = signal.Signals(signum).name
    return f"rmb {args.command}: stopped by {name}; it had ended (exit {code}) and its outputs are whole"


def _call(args: argparse.Namespace) -> int:
    """The command's exit code; a failed import of a module an optional extra installs becomes the
    one-line error that names the extra (never an ImportError traceback)."""
    try:
        return int(args._run(args) or 0)
    except ImportError as exc:
        hint = missing_extra(exc)
        if hint is None:
            raise
        raise hint from exc


def main(argv: list[str] | None = None) -> int:
    program = argv is None  # the process's entry point (not a call from Python code)
    code = _main(sys.argv[1:] if argv is None else argv, program)
    if program:
        stop.clear_unhandled_interrupt()
    return code


def _main(argv: list[str], program: bool) -> int:
    args = None
    sys.excepthook = _print_traceback  # an unexpected error's traceback too, redacted
    with stop.handlers():  # from the start: a Ctrl-C while the commands are imported stops in one line too
        try:
            parser = build_parser()
            args = parser.parse_args(argv)
            configure_logging(args.verbose)
            if not getattr(args, "_run", None):
                parser.print_help()
                return 2
            if not debugging(args):
                stop.on_stop(_quiet_unwinding)
                if program:  # the hooks are the process's: a caller's own (a test runner's) are left alone
                    stop.on_stop(stop.quiet_threads)
            code = _call(args)
            stop.check()  # a command that ran on after a stop (its exception swallowed) was stopped
            sys.stdout.flush()  # here, where a reader that has gone away is caught, not at exit
            if program:
                stop.end_at_once(lambda signum: finished_line(args, code, signum))
            return code
        except BaseException as exc:
            stop.caught()
            # After a stop signal whatever comes out (a KeyboardInterrupt, Prefect's TerminationSignal,
            # a connection error from a server the same Ctrl-C stopped) is that stop.
            signum = stop.received()
            if signum is None and _interrupted(exc):
                signum = signal.SIGINT if isinstance(exc, KeyboardInterrupt) else signal.SIGTERM
            if signum is None:
                if isinstance(exc, BrokenPipeError) and _stdout_gone():
                    _quiet_stdout()
                    return EXIT_BROKEN_PIPE
                # a bad input, or a full disk, a read-only place, ... wherever it was met: one line
                line = None
                if args is not None and isinstance(exc, RMBError):
                    line = str(exc)
                elif args is not None and isinstance(exc, OSError):
                    line = environment_error(exc)
                if line is None:
                    raise
                if debugging(args):
                    _print_traceback(*sys.exc_info())
                print(f"rmb {args.command}: error: {redact(line)}", file=sys.stderr)
                return 2
            if debugging(args):
                _print_traceback(*sys.exc_info())
            else:  # again, now that all is unwound: a library's catch_warnings block took the first warning filter
                _quiet_unwinding()  # with it, and a coroutine collected at exit was reported under the line
            print(stop_line(args, argv, signum), file=sys.stderr)
            if program and not debugging(args):
                stop.quiet_exit()  # kept after handlers(): the interpreter's teardown comes after them
    # Stopped. Only exit handlers run from here (servers stopping): another Ctrl-C must not cut them short.
    if program:
        for sig in stop.SIGNALS:
            signal.signal(sig, signal.SIG_IGN)
        stop.bounded_exit(128 + signum)
    return 128 + signum


if __name__ == "__main__":
    sys.exit(main())

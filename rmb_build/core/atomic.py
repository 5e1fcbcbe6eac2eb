"""Atomic writes: a file (``open_atomic``) or a whole folder (``atomic_dir``) is written beside its
target, fsynced, then renamed into place.

A crash or a full disk never leaves a half-written file or folder where a reader would find it; what
was there before stays as it was until the new one is complete.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import secrets
import shutil
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Callable, Collection, Iterable, Iterator

from rmb_build.core import lock, owner
from rmb_build.core.errors import ENVIRONMENT_ERRNOS, RMBError, environment_error
from rmb_build.core.finite import first_non_finite


def _umask() -> int:
    # mkstemp and mkdtemp create 0600 files and 0700 folders; outputs should get the usual modes & ~umask.
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _umask()
_MODE = 0o666 & ~_UMASK


@contextmanager
def open_atomic(path: str | os.PathLike) -> Iterator[IO[bytes]]:
    """A binary file to write ``path`` through: it appears (fsynced, renamed over) only when the block
    ends without an exception; otherwise the temporary file is removed and ``path`` is untouched.
    A pipe or a device (``/dev/stdout``, a FIFO) is written in place: there is nothing to rename over it."""
    path = Path(path)
    tmp = None
    try:
        if path.exists() and not path.is_file() and not path.is_dir():
            with open(path, "wb") as fh:
                yield fh
            return
        _make_folder(path.parent)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        os.fchmod(fd, _MODE)
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
        if isinstance(exc, OSError) and exc.errno in ENVIRONMENT_ERRNOS and _names_no_file(exc, path):
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
        raise


def _make_folder(folder: Path) -> None:
    """``mkdir -p``; a file in the way is ENOTDIR naming the folder (mkdir says only "File exists")."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(folder)) from None


def _names_no_file(exc: OSError, path: Path) -> bool:
    """A failed write names no file, a failed mkstemp its temporary one: either should name ``path``."""
    return exc.filename is None or Path(str(exc.filename)).name.startswith(f".{path.name}.")


def write_bytes(path: str | os.PathLike, data: bytes) -> None:
    with open_atomic(path) as fh:
        fh.write(data)


def write_text(path: str | os.PathLike, text: str) -> None:
    write_bytes(path, text.encode("utf-8"))


def _dumps(path: str | os.PathLike, obj: object, indent: int | None = None, line: int | None = None) -> str:
    """Strict JSON (no NaN or Infinity, which strict readers reject): RMBError naming the field otherwise."""
    try:
        return json.dumps(obj, indent=indent, ensure_ascii=False, allow_nan=False)
    except ValueError:
        field = first_non_finite(obj)
        if field is None:
            raise
        where = f"{path}: line {line}" if line is not None else str(path)
        raise RMBError(f"{where}: field '{field}' is not a finite number; the file was not written") from None


def write_json(path: str | os.PathLike, obj: object, indent: int | None = 2) -> None:
    write_text(path, _dumps(path, obj, indent) + "\n")


def write_jsonl(path: str | os.PathLike, rows: Iterable[dict]) -> None:
    write_text(path, "".join(_dumps(path, r, line=n) + "\n" for n, r in enumerate(rows, 1)))


# --------------------------------------------------------------------------------------------------
# A whole output folder


def _is_temp(name: str) -> bool:
    return name.startswith(".") and (name.endswith(".tmp") or ".tmp-" in name or name == MARKER)


def check_out_dir(out: str | os.PathLike, owned: Collection[str], marks: Collection[str], flag: str = "--out") -> None:
    """Refuse ``out`` unless it is absent, an empty folder, or an earlier output of the same command: a
    folder holding one of ``marks`` and nothing but ``owned`` names (and our temporary files). Anything
    else there is someone else's, and ``atomic_dir`` would replace it all."""
    out = Path(out)
    if not out.exists():
        return
    if not out.is_dir():
        raise RMBError(f"{flag} {out}: exists and is not a folder; choose a folder")
    real, here = Path(os.path.realpath(out)), Path(os.path.realpath(os.curdir))
    if real == here or real in here.parents:
        raise RMBError(f"{flag} {out}: is the current folder or holds it, which is not replaced; choose another")
    names = [p.name for p in out.iterdir() if not _is_temp(p.name)]
    if not names:
        return
    foreign = sorted(n for n in names if n not in owned)
    if foreign or not set(names) & set(marks):
        why = f"holds {', '.join(foreign[:3])}{' ...' if len(foreign) > 3 else ''}" if foreign else "is not empty"
        raise RMBError(
            f"{flag} {out}: {why}, not an earlier output of this command (it would be replaced as a whole); "
            "choose an empty folder or a new one"
        )


def _fsync_tree(root: Path) -> None:
    for folder, _dirs, files in os.walk(root):
        for name in files:
            _fsync(os.path.join(folder, name))
        _fsync(folder)


def _fsync(path: str | os.PathLike) -> None:
    """Flush a file's, or a folder's entries', writes to the disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


MARKER = ".rmb-writer.json"  # inside a writer's hidden folder: its token and its Owner (core/owner.py)
_OLD = "-old"  # the hidden folder holding an earlier output while the new one is swapped in


def _mark(folder: Path, token: str) -> None:
    """Say in ``folder`` who writes it, so that a later sweep can tell it from a folder of someone else's."""
    with open(folder / MARKER, "w", encoding="utf-8") as fh:
        json.dump({"token": token, **owner.current().to_json()}, fh)
        fh.flush()
        os.fsync(fh.fileno())


def _swap_in(tmp: Path, target: Path, token: str) -> None:
    """``tmp`` becomes ``target``. An earlier ``target`` waits in ``<tmp>-old/out`` (a marked folder) until
    the new one is in place, and is put back if that fails; a writer killed meanwhile leaves it for the
    next sweep to put back. The marker goes last: a kill just before leaves it in ``target``, which the
    next write of ``target`` replaces as a whole (``check_out_dir`` passes it by)."""
    if not target.exists():
        os.rename(tmp, target)
    else:
        backup = tmp.with_name(tmp.name + _OLD)
        backup.mkdir()
        _mark(backup, token)
        os.rename(target, backup / "out")
        try:
            os.rename(tmp, target)
        except BaseException:
            os.rename(backup / "out", target)
            shutil.rmtree(backup, ignore_errors=True)
            raise
        shutil.rmtree(backup, ignore_errors=True)
    os.unlink(target / MARKER)
    try:
        _fsync(target.parent)
    except OSError:
        pass  # the rename is done; only its durability across a power cut is in doubt


def _writer(folder: str, token: str, pid: str) -> tuple[owner.Owner | None, str]:
    """The writer a hidden folder's marker names, or None and why it names none."""
    try:
        with open(os.path.join(folder, MARKER), encoding="utf-8") as fh:
            raw = json.load(fh)
    except FileNotFoundError:
        return None, "it holds no marker of rmb's"
    except (OSError, ValueError) as exc:
        return None, f"its marker cannot be read ({exc.__class__.__name__})"
    found = owner.Owner.from_json(raw)
    if found is None or raw.get("token") != token or str(found.pid) != pid:
        return None, "its marker does not match its name"
    return found, ""


def _sweep_stale(target: Path) -> None:
    """Remove the hidden siblings ``.<name>.tmp-<pid>-<token>[-old]`` that an earlier writer of ``target``
    left when it was killed (SIGKILL, a power cut): only those whose marker this module wrote and whose
    writer is provably gone (``owner.gone``). An earlier output set aside (``-old``) is put back where
    ``target`` is missing: the output as it was, not absent. Anything else named like one is left, and
    said in one line on stderr."""
    prefix = f".{target.name}.tmp-"
    try:
        siblings = sorted(os.scandir(target.parent), key=lambda e: e.name)
    except OSError:
        return
    for entry in siblings:
        if not entry.name.startswith(prefix) or not entry.is_dir(follow_symlinks=False):
            continue
        pid, _, token = entry.name[len(prefix) :].partition("-")
        old = token.endswith(_OLD)
        token = token.removesuffix(_OLD) if old else token
        writer, why = _writer(entry.path, token, pid)
        if writer is not None and not owner.gone(writer):
            if owner.here(writer):
                continue  # its writer is running here
            why = f"its writer, {writer.describe()}, may still be writing it"
        if writer is None or why:
            print(f"note: left {entry.path}: {why}; delete it if nothing writes it", file=sys.stderr)
            continue
        if old and not os.path.lexists(target) and os.path.isdir(os.path.join(entry.path, "out")):
            os.rename(os.path.join(entry.path, "out"), target)
        shutil.rmtree(entry.path, ignore_errors=True)


@contextmanager
def atomic_dir(
    out: str | os.PathLike, owned: Collection[str] = (), marks: Collection[str] = (), flag: str = "--out"
) -> Iterator[Path]:
    """A fresh folder to write ``out``'s contents into: a hidden sibling ``.<name>.tmp-<pid>-…`` on the same
    file system. When the block ends without an exception it is fsynced and renamed to ``out``, replacing
    an earlier output as a whole; otherwise it is removed and ``out`` stays as it was. Siblings that a
    killed earlier writer left are swept first (``_sweep_stale``).

    ``out`` must pass ``check_out_dir(out, owned, marks)``. A symbolic link keeps pointing at the new folder.
    A full disk, a read-only place and the like raise RMBError: one line naming ``out``.
    """
    out = Path(out)
    # absolute, so that its parent is where the sibling goes ("." has none); a link keeps pointing here
    target = Path(os.path.realpath(out) if out.is_symlink() else os.path.abspath(out))
    existed, tmp = target.exists(), None
    held = contextlib.ExitStack()
    try:
        _make_folder(target.parent)
        held.enter_context(lock.hold_out(out, flag))  # one writer of ``out`` at a time
        # checked under the lock: another writer's swap (``out`` renamed away, its old files being removed)
        # must read as "in use by", not as a missing or foreign folder or a raw FileNotFoundError
        check_out_dir(out, owned, marks, flag)
        _sweep_stale(target)
        existed = target.exists()  # an output set aside by a killed writer is back
        token = secrets.token_hex(8)
        tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}-{token}")
        tmp.mkdir(mode=0o700)
        _mark(tmp, token)
        os.chmod(tmp, 0o777 & ~_UMASK)
        yield tmp
        _fsync_tree(tmp)
        check_out_dir(out, owned, marks, flag)  # what appeared there meanwhile (a cache under --out?) stays
        try:
            _swap_in(tmp, target, token)
        except OSError as exc:
            if environment_error(exc) is not None:
                raise
            # only a writer that takes no lock (another host, an older rmb) gets here
            raise RMBError(
                f"{flag} {out}: cannot put the new output in place ({exc.strerror or exc}): "
                "another process changed it meanwhile; the new output was not written"
            ) from exc
        held.close()
    except BaseException as exc:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        held.close()
        line = environment_error(exc)
        if line is None:
            raise
        if tmp is not None:  # name the file as it would have been called in ``out``
            line = line.replace(str(tmp), str(out))
        kept = "it is as it was" if existed else "nothing was written"
        raise RMBError(f"{flag} {out}: cannot write: {line} ({kept})") from exc


def write_once(
    out: str | os.PathLike,
    write: Callable[[Path], object],
    *,
    flag: str,
    wait_s: float,
    on_wait: Callable[[str], object] | None = None,
) -> Path:
    """``out``, a cache folder: written by ``write(folder)`` through ``atomic_dir`` unless it exists already.

    Where another process is writing it (two servers preparing one model at once), this one waits up to
    ``wait_s`` seconds for that writer and takes its folder rather than being refused or writing it twice;
    a writer that dies leaves no folder, and the one waiting writes it. A wait run out is RMBError naming the
    writer; ``on_wait(writer)`` is told as the wait begins.
    """
    out = Path(out)
    if out.is_dir():
        return out
    with lock.hold_out(out, flag, wait_s=wait_s, on_wait=on_wait):
        if not out.is_dir():
            with atomic_dir(out, flag=flag) as folder:  # the lock is ours already: atomic_dir's own goes on
                write(folder)
    return out

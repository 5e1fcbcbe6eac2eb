"""Stream the records of a (possibly cut-off) top-level JSON array, such as ShareGPT's 125 MB dump.

The file is read in chunks and each element decoded with ``json.JSONDecoder.raw_decode``, so only
one record at a time becomes a Python object. An array cut off mid-record yields every complete
record and then reports the incomplete tail instead of failing.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Iterator

from rmb_build.core.errors import InputError

_WS = " \t\r\n"


@dataclass
class ArrayTail:
    """What is left after the last complete element: ``incomplete`` holds the cut-off bytes' count."""

    complete: bool = False  # the closing ``]`` was found
    incomplete_chars: int = 0  # characters of a trailing, cut-off element (0 when the array is whole)


def iter_json_array(
    path: str | os.PathLike, tail: ArrayTail | None = None, chunk_chars: int = 1 << 20
) -> Iterator[tuple[int, Any]]:
    """Yield ``(index, element)`` for each complete element of the JSON array in ``path``.

    Invalid JSON inside the array raises InputError with the element index and line; a file that
    simply ends early stops the iteration and sets ``tail.incomplete_chars``.
    """
    tail = tail if tail is not None else ArrayTail()
    decoder = json.JSONDecoder()
    name = str(path)
    with open(path, encoding="utf-8") as fh:
        buf = fh.read(chunk_chars)
        pos, line, eof = 0, 1, False

        def more() -> bool:
            nonlocal buf, pos, eof, line
            if eof:
                return False
            chunk = fh.read(chunk_chars)
            if not chunk:
                eof = True
                return False
            line += buf.count("\n", 0, pos)
            buf, pos = buf[pos:] + chunk, 0
            return True

        def skip_ws() -> bool:
            nonlocal pos
            while True:
                while pos < len(buf) and buf[pos] in _WS:
                    pos += 1
                if pos < len(buf) or not more():
                    return pos < len(buf)

        if not skip_ws() or buf[pos] != "[":
            raise InputError(name, "expected a JSON array (the file does not start with '[')", line=1)
        pos += 1
        index = 0
        while True:
            if not skip_ws():
                return  # ended right after '[' or ','
            if buf[pos] == "]":
                tail.complete = True
                return
            if index and buf[pos] == ",":
                pos += 1
                if not skip_ws():
                    return
            while True:
                try:
                    value, end = decoder.raw_decode(buf, pos)
                    break
                except json.JSONDecodeError as exc:
                    if more():
                        continue  # the element may just span the chunk boundary
                    # at EOF: an unterminated string or an error at the very end means a cut-off file
                    if exc.msg.startswith("Unterminated string") or exc.pos >= len(buf.rstrip()):
                        tail.incomplete_chars = len(buf) - pos
                        return
                    raise InputError(
                        name, f"invalid JSON: {exc.msg}", item=index, line=line + buf.count("\n", 0, exc.pos)
                    ) from None
            yield index, value
            index += 1
            pos = end
            if pos > chunk_chars:
                line += buf.count("\n", 0, pos)
                buf, pos = buf[pos:], 0

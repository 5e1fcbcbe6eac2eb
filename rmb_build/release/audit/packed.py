"""What outlives an audited item, packed: where it lives (``Items``) and the fixed-size records of
digests and item numbers a comparing kind keeps (``Records``), sorted into groups when the last item is in.
"""

from __future__ import annotations

import hashlib
import struct
from array import array
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator, Sequence

if TYPE_CHECKING:  # imported where used: an audit without packed records never loads it
    import numpy as np


def digest(text: str) -> bytes:
    """16 bytes standing for ``text`` where only equality matters."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


@dataclass(frozen=True, slots=True)
class Ref:
    """Where an item lives (``order``: its position in the whole release); what entries name. Made
    for the item being audited and, from ``Items``, for the items a defect names; never kept."""

    set: str
    uid: str
    file: str
    index: int
    scenario: str
    order: int

    def ref(self) -> dict[str, Any]:
        return {"set": self.set, "uid": self.uid, "file": self.file, "index": self.index, "scenario": self.scenario}


class Items:
    """Every audited item's ``Ref`` fields, packed: per item three array slots (file number, index,
    end of its uid) and its uid's bytes in one buffer (at 100,000 items, a few MB and no Python
    object per item)."""

    def __init__(self) -> None:
        self._files: list[tuple[str, str, str]] = []  # (file, set, scenario), by file number
        self._file_no: dict[str, int] = {}
        self._file = array("I")
        self._index = array("Q")
        self._uid_end = array("Q")
        self._uids = bytearray()

    def __len__(self) -> int:
        return len(self._file)

    def add(self, set_name: str, uid: str, file: str, index: int, scenario: str) -> Ref:
        """Record the next item; its ``Ref`` (``order``: the number of items recorded before it)."""
        no = self._file_no.get(file)
        if no is None:
            no = self._file_no[file] = len(self._files)
            self._files.append((file, set_name, scenario))
        order = len(self._file)
        self._file.append(no)
        self._index.append(index)
        self._uids += uid.encode("utf-8", "surrogatepass")
        self._uid_end.append(len(self._uids))
        return Ref(set_name, uid, file, index, scenario, order)

    def at(self, order: int) -> Ref:
        """The ``Ref`` of item number ``order``."""
        file, set_name, scenario = self._files[self._file[order]]
        start = self._uid_end[order - 1] if order else 0
        uid = self._uids[start : self._uid_end[order]].decode("utf-8", "surrogatepass")
        return Ref(set_name, uid, file, self._index[order], scenario, order)


class Records:
    """Fixed-size records appended to one bytearray (``fields``: (name, struct code) pairs, ``16s``
    digests and ``I`` numbers), read back as one numpy structured array: what a comparing kind keeps
    of every item without a Python object per item."""

    _NUMPY = {"16s": "S16", "I": "<u4", "?": "?"}

    def __init__(self, *fields: tuple[str, str]):
        self._struct = struct.Struct("<" + "".join(code for _, code in fields))
        self._dtype = [(name, self._NUMPY[code]) for name, code in fields]
        self._buf = bytearray()

    def append(self, *values: object) -> None:
        self._buf += self._struct.pack(*values)

    def array(self) -> np.ndarray:
        """The records as a numpy structured array (a view of the buffer, not a copy)."""
        import numpy as np

        return np.frombuffer(self._buf, dtype=np.dtype(self._dtype))


def grouped(records: np.ndarray, keys: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """The records sorted by ``keys`` (equal keys: in the order they were appended), and the bounds of
    each group of equal keys: group ``g`` is ``sorted[bounds[g]:bounds[g + 1]]``."""
    import numpy as np

    ordered = records[np.lexsort((np.arange(len(records)), *(records[k] for k in reversed(keys))))]
    starts = np.zeros(len(ordered), dtype=bool)
    starts[:1] = True
    for key in keys:
        starts[1:] |= ordered[key][1:] != ordered[key][:-1]
    return ordered, np.append(np.flatnonzero(starts), len(ordered))


def runs(records: np.ndarray, keys: Sequence[str], min_size: int = 1) -> Iterator[np.ndarray]:
    """The groups of ``grouped`` with at least ``min_size`` records, one structured array each."""
    ordered, bounds = grouped(records, keys)
    for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        if hi - lo >= min_size:
            yield ordered[lo:hi]

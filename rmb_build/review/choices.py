"""The page's answer: a position in the order the annotator saw the answers (``"1"`` .. ``"N"``) or a
word, mapped back to the release's own terms (``release.review_labels``) whatever that order was."""

from __future__ import annotations

from typing import Sequence

from rmb_build.core.errors import RMBError
from rmb_build.release.review_labels import BOTH_BAD, CANT_JUDGE, SKIP, TIE, answer_terms

WORDS = (TIE, BOTH_BAD, SKIP, CANT_JUDGE)


def to_release_terms(set_name: str, order: Sequence[int], shown: str) -> str:
    """The release's term for what the page said: ``shown`` is ``"k"`` (the k-th answer shown, from 1) or a word."""
    if shown in WORDS:
        return shown
    numbers = [str(k + 1) for k in range(len(order))]  # not int(shown): it reads '٣', and str.isdigit takes '²'
    if shown not in numbers:
        raise RMBError(f"{quoted(shown)} is not an answer of this item (1 to {len(order)}, or {', '.join(WORDS)})")
    return answer_terms(set_name, len(order))[order[numbers.index(shown)]]


def quoted(value: str) -> str:
    """A value a request gave, for a one-line message: quoted, and cut where it is long."""
    return repr(value if len(value) <= 40 else value[:40] + "...")


def to_shown(set_name: str, order: Sequence[int], choice: str) -> str:
    """The inverse: what the page would have said for the release's term ``choice``."""
    if choice in WORDS:
        return choice
    terms = answer_terms(set_name, len(order))
    return str(list(order).index(terms.index(choice)) + 1)


__all__ = ["WORDS", "quoted", "to_release_terms", "to_shown"]

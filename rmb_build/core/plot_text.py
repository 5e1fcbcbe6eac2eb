"""Text on a plot is drawn as given: names (an RM spec, a scenario id, a release's name) come from users and
files, and matplotlib would read ``$...$`` in them as mathtext (``$\\foo$`` stops the run with a parse error;
nested braces with a RecursionError) and ``text.usetex`` would hand them to LaTeX."""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING, Iterator

if TYPE_CHECKING:
    from matplotlib.typing import RcKeyType

PLAIN_TEXT: dict[RcKeyType, bool] = {"text.parse_math": False, "text.usetex": False}


@contextmanager
def plain_text() -> Iterator[None]:
    """Within it, every text matplotlib creates and draws is plain text."""
    import matplotlib

    with matplotlib.rc_context(PLAIN_TEXT):
        yield


__all__ = ["PLAIN_TEXT", "plain_text"]

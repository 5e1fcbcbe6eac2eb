"""A score is a finite number or it is refused: the one test every score passes where it enters.

Python's ``json`` reads and writes ``NaN`` and ``Infinity``, which strict JSON readers reject, and an
integer too large for a float (``10**400``) raises ``OverflowError`` at the first arithmetic; each is
caught here and named in the caller's error line.
"""

from __future__ import annotations

import json
import math
import numbers


def finite_float(value: object) -> float | None:
    """``value`` as a float when it is a finite real number (not a bool); None otherwise."""
    if type(value) is float:  # the common case, without the ABC check below (a scores file's millions of rows)
        return value if math.isfinite(value) else None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    try:
        out = float(value)
    except OverflowError:
        return None
    return out if math.isfinite(out) else None


def describe(value: object) -> str:
    """How an error line names a value that is not a finite number."""
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        try:
            number = float(value)
        except OverflowError:
            if isinstance(value, numbers.Integral):
                # str() of an integer of over 4300 digits raises; its bit length does not
                return f"an integer too large for a float (about {int(int(value).bit_length() * math.log10(2)) + 1} digits)"
            return "a number too large for a float"
        if math.isnan(number):
            return "NaN"
        return ("Infinity" if number > 0 else "-Infinity") if math.isinf(number) else repr(number)
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = type(value).__name__
    return text[:40]


def first_non_finite(value: object, where: str = "") -> str | None:
    """The path (``pairwise.overall.macro``, ``scores.chosen``, ``[3]``) of the first NaN or infinite float
    in a JSON-like value, or None when there is none."""
    if isinstance(value, float):
        return None if math.isfinite(value) else (where or "the value")
    if isinstance(value, dict):
        items = ((f"{where}.{k}" if where else str(k), v) for k, v in value.items())
    elif isinstance(value, (list, tuple)):
        items = ((f"{where}[{i}]", v) for i, v in enumerate(value))
    else:
        return None
    return next((hit for k, v in items if (hit := first_non_finite(v, k)) is not None), None)

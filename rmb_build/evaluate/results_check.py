"""The figures a page, a card or a plot reads from a results.json, checked for type and range.

Every results folder is read through ``published.read_results``, which calls ``check_figures``: an accuracy,
rate or interval bound is a finite number from 0 to 1, a count a non-negative integer, a name a string. A
figure given as a string (``"0.5"``, ``"nan"``), a boolean, a list, NaN, ``1e308`` or ``-5`` stops the reader
with one line naming the file and the field (``pairwise.scenarios.Harmlessness/S6.accuracy``), before any page
formats it or any plot draws it. Parts a results.json lacks are not required here (older files lack some);
what its figures say is checked against its predictions by the leaderboard (``leaderboard/entries.py``).
"""

from __future__ import annotations

from typing import Callable, Mapping

from rmb_build.core.errors import InputError
from rmb_build.core.finite import describe, finite_float
from rmb_build.core.intervals import MAX_DRAWS
from rmb_build.core.taxonomy import BON_SET, PAIRWISE_SET

SLACK = 1e-9  # rounding of a bound computed at 0 or 1

Check = Callable[[object, str], None]  # (a figure as read, its field)


class _Checker:
    def __init__(self, where: str):
        self.where = where

    def fail(self, field: str, message: str, value: object) -> InputError:
        return InputError(self.where, f"{message}, got {describe(value)}", field=field)

    def fraction(self, value: object, field: str, nullable: bool = True) -> None:
        if value is None and nullable:
            return
        x = finite_float(value)
        if x is None or not -SLACK <= x <= 1 + SLACK:
            raise self.fail(field, "expected a number from 0 to 1", value)

    def count(self, value: object, field: str, nullable: bool = True) -> None:
        if value is None and nullable:
            return
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise self.fail(field, "expected a whole number of at least 0", value)

    def interval(self, value: object, field: str) -> None:
        if value is None:
            return
        if not isinstance(value, list) or len(value) != 2:
            raise self.fail(field, "expected [low, high]", value)
        for k, bound in enumerate(value):
            self.fraction(bound, f"{field}[{k}]", nullable=False)
        if value[0] > value[1] + SLACK:
            raise self.fail(field, "expected low <= high", value)

    def text(self, value: object, field: str, nullable: bool = True) -> None:
        if value is None and nullable:
            return
        if not isinstance(value, str):
            raise self.fail(field, "expected a string", value)

    def mapping(self, value: object, field: str) -> Mapping[str, object]:
        """``value`` when it is an object; {} when absent (None)."""
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise self.fail(field, "expected an object", value)
        return value

    def keys(self, value: Mapping[str, object], field: str, check: Check, names: tuple[str, ...]) -> None:
        """``check`` each of ``names`` in ``value`` (absent: None), named ``field.name``."""
        for name in names:
            check(value.get(name), f"{field}.{name}")

    def each(self, value: object, field: str, check: Check) -> None:
        for key, v in self.mapping(value, field).items():
            check(v, f"{field}.{key}")


def _group(c: _Checker, value: object, field: str) -> None:
    """A task, goal or overall figure: macro, micro, n, their intervals."""
    g = c.mapping(value, field)
    c.keys(g, field, c.fraction, ("macro", "micro"))
    c.keys(g, field, c.count, ("n", "n_scenarios", "few_item_scenarios"))
    c.keys(g, field, c.interval, ("ci95_macro", "ci95_micro"))


def _scenario(c: _Checker, value: object, field: str) -> None:
    s = c.mapping(value, field)
    c.fraction(s.get("accuracy"), f"{field}.accuracy", nullable=False)  # the heatmap and the page draw it
    c.count(s.get("n"), f"{field}.n", nullable=False)
    c.interval(s.get("ci95"), f"{field}.ci95")
    c.fraction(s.get("chance"), f"{field}.chance")


def _set(c: _Checker, value: object, field: str) -> None:
    s = c.mapping(value, field)
    c.each(s.get("scenarios"), f"{field}.scenarios", lambda v, f: _scenario(c, v, f))
    for part in ("tasks", "goals"):
        c.each(s.get(part), f"{field}.{part}", lambda v, f: _group(c, v, f))
    _group(c, s.get("overall"), f"{field}.overall")


def _overall(c: _Checker, value: object, field: str) -> None:
    o = c.mapping(value, field)
    c.each(o.get("cells"), f"{field}.cells", c.fraction)
    c.fraction(o.get("mean"), f"{field}.mean")
    c.each(o.get("ci95"), f"{field}.ci95", c.interval)
    c.each(o.get("n"), f"{field}.n", c.count)
    c.each(o.get("few_item_scenarios"), f"{field}.few_item_scenarios", c.count)


def _figures(c: _Checker, value: object, field: str, figures: tuple[str, ...]) -> None:
    """A style group: each figure a fraction, ``ci95`` an interval per figure, ``n`` a count."""
    g = c.mapping(value, field)
    for fig in figures:
        c.fraction(g.get(fig), f"{field}.{fig}")
    c.each(g.get("ci95"), f"{field}.ci95", c.interval)
    c.keys(g, field, c.count, ("n", "few_item_scenarios"))


SCORING_COUNTS = ("naive", "unique", "cached", "scored", "failed", "from_file")
STYLE_FIGURES = ("hard", "normal", "easy", "average", "prefers_detailed", "prefers_markdown")


def _style(c: _Checker, value: object, field: str) -> None:
    s = c.mapping(value, field)
    _figures(c, s.get("overall"), f"{field}.overall", STYLE_FIGURES)
    for part in ("scenarios", "tasks", "goals"):
        c.each(s.get(part), f"{field}.{part}", lambda v, f: _figures(c, v, f, STYLE_FIGURES))
    if s.get("bon") is not None:
        _style(c, s.get("bon"), f"{field}.bon")


def _length_control(c: _Checker, value: object, field: str) -> None:
    """The length-neutral figure a leaderboard column shows (``overall``)."""
    lc = c.mapping(value, field)
    g = c.mapping(lc.get("overall"), f"{field}.overall")
    c.fraction(g.get("length_neutral"), f"{field}.overall.length_neutral")
    c.interval(g.get("length_neutral_ci95"), f"{field}.overall.length_neutral_ci95")


def _bias(c: _Checker, value: object, field: str) -> None:
    b = c.mapping(value, field)
    for side, v in c.mapping(b.get("length"), f"{field}.length").items():
        row = c.mapping(v, f"{field}.length.{side}")
        c.fraction(row.get("accuracy"), f"{field}.length.{side}.accuracy")
        c.count(row.get("n"), f"{field}.length.{side}.n")
    pos = c.mapping(b.get("position"), f"{field}.position")
    c.keys(pos, f"{field}.position", c.fraction, ("position_following_rate", "first_position_rate"))
    c.keys(pos, f"{field}.position", c.count, ("n_order_pairs", "n_verdicts"))


def _release(c: _Checker, value: object, field: str) -> None:
    r = c.mapping(value, field)
    c.keys(r, field, c.text, ("name", "sha256", "format"))
    c.each(r.get("items"), f"{field}.items", c.count)
    audit = c.mapping(r.get("audit"), f"{field}.audit")
    c.each(audit.get("counts"), f"{field}.audit.counts", c.count)


def _coverage(c: _Checker, value: object, field: str) -> None:
    cov = c.mapping(value, field)
    c.keys(cov, field, c.count, ("items", "scored"))
    c.fraction(cov.get("fraction"), f"{field}.fraction")
    if cov.get("partial") is not None and not isinstance(cov.get("partial"), bool):
        raise c.fail(f"{field}.partial", "expected true or false", cov.get("partial"))


def check_figures(results: Mapping[str, object], where: str) -> None:
    """InputError naming ``where`` and the field of the first figure of ``results`` a page or plot reads that is
    not of its type and range."""
    c = _Checker(where)
    c.text(results.get("rm"), "rm", nullable=False)
    for key in ("release", "ties", "fingerprint", "command"):
        c.text(results.get(key), key)
    for set_name in (PAIRWISE_SET, BON_SET):
        _set(c, results.get(set_name), set_name)
    _overall(c, results.get("rmb_overall"), "rmb_overall")
    _style(c, results.get("style"), "style")
    _length_control(c, results.get("length_control"), "length_control")
    _bias(c, results.get("bias"), "bias")
    _release(c, results.get("release_info"), "release_info")
    _coverage(c, results.get("coverage"), "coverage")
    c.keys(c.mapping(results.get("scoring"), "scoring"), "scoring", c.count, tuple(SCORING_COUNTS))
    c.count(c.mapping(results.get("skipped_defective"), "skipped_defective").get("n"), "skipped_defective.n")
    c.each(
        c.mapping(results.get("release_defects"), "release_defects").get("counts"), "release_defects.counts", c.count
    )
    for part, key in (("bootstrap", "resamples"), ("intervals", "draws")):
        block = c.mapping(results.get(part), part)
        draws = block.get(key)
        c.count(draws, f"{part}.{key}")
        if isinstance(draws, int) and not 1 <= draws <= MAX_DRAWS:  # a page redraws its intervals with it
            raise c.fail(f"{part}.{key}", f"expected 1 to {MAX_DRAWS:,} draws", draws)
        seed = block.get("seed")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise c.fail(f"{part}.seed", "expected a whole number", seed)


__all__ = ["check_figures"]

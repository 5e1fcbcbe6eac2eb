"""heatmap.png: colours relative to each set's chance level, drawn from any results.json object."""

from __future__ import annotations

import struct

import pytest

from rmb_build.evaluate.heatmap import relative_to_chance, set_chance, write_heatmap
from rmb_build.evaluate.metrics import build_results

pytestmark = pytest.mark.draws_heatmaps  # what these tests check is the drawing


def test_colour_scale_is_anchored_at_chance():
    assert relative_to_chance(0.5, 0.5) == 0 and relative_to_chance(0.25, 0.25) == 0
    assert relative_to_chance(1.0, 0.25) == 1 and relative_to_chance(0.0, 0.25) == -1
    assert relative_to_chance(0.625, 0.25) == pytest.approx(0.5)  # half way from chance to perfect
    assert relative_to_chance(0.125, 0.25) == pytest.approx(-0.5)


def _png_size(path):
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_bon_chance_is_the_mean_of_one_over_answers(tmp_path):
    preds = [
        {"set": "bon", "uid": str(i), "scenario": "Harmlessness/S1", "outcome": 1.0, "chance": c}
        for i, c in enumerate((1 / 2, 1 / 4, 1 / 4, 1 / 6))
    ]
    preds += [{"set": "pairwise", "uid": "p", "scenario": "Helpfulness/Chat/Discussion", "outcome": 0.0, "chance": 0.5}]
    res = build_results(preds, rm="x", release="r", ties="strict", resamples=10)
    assert res["bon"]["scenarios"]["Harmlessness/S1"]["chance"] == pytest.approx((1 / 2 + 1 / 4 + 1 / 4 + 1 / 6) / 4)
    assert set_chance(res, "pairwise") == 0.5
    small = write_heatmap(res, tmp_path / "small.png")
    assert small == tmp_path / "small.png"
    # More scenarios make a taller figure, not a larger empty margin: the canvas follows its content.
    preds += [
        {**preds[-1], "uid": f"q{k}", "scenario": sc}
        for k, sc in enumerate(
            ("Helpfulness/Code/Documentation", "Helpfulness/Open QA/Factual", "Harmlessness/S2", "Harmlessness/S3")
        )
    ]
    big = write_heatmap(build_results(preds, rm="x", release="r", ties="strict", resamples=10), tmp_path / "big.png")
    (w1, h1), (w2, h2) = _png_size(small), _png_size(big)
    assert h2 > h1 and abs(w2 - w1) < 0.2 * w1


def test_older_results_without_chance_and_empty_results(tmp_path):
    preds = [{"set": "pairwise", "uid": "0", "scenario": "Harmlessness/S6", "outcome": 1.0}]
    res = build_results(preds, rm="x", release="r", ties="strict", resamples=10)
    assert "chance" not in res["pairwise"]["scenarios"]["Harmlessness/S6"]
    assert write_heatmap(res, tmp_path / "h.png").is_file()
    assert (
        write_heatmap(build_results([], rm="x", release="r", ties="strict", resamples=10), tmp_path / "e.png") is None
    )
    assert not (tmp_path / "e.png").exists()


@pytest.mark.parametrize(
    "name",
    [r"$\foo$", "$" + "{" * 400 + "x" + "}" * 400 + "$", r"a $x^{2}$ and \$ and $$"],
    ids=["unknown-command", "nested", "mixed"],
)
def test_names_are_drawn_as_plain_text(tmp_path, name):
    """An RM spec or scenario name holding mathtext: main stopped with ParseFatalException (a nested one with
    RecursionError) after the whole scoring run; the names are text, drawn as given."""
    preds = [
        {"set": "pairwise", "uid": "1", "scenario": "Helpfulness/Chat/Discussion", "outcome": 1.0, "chance": 0.5},
        {"set": "pairwise", "uid": "2", "scenario": f"Helpfulness/{name}", "outcome": 0.0, "chance": 0.5},
    ]
    res = build_results(preds, rm=f"python:{name}:score", release="r", ties="strict", resamples=10)
    assert write_heatmap(res, tmp_path / "h.png") == tmp_path / "h.png"
    _png_size(tmp_path / "h.png")


def test_a_png_that_fails_to_save_leaves_the_old_file_no_temp_and_no_open_figure(tmp_path, monkeypatch):
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure

    from rmb_build.evaluate.heatmap import save_png

    path = tmp_path / "plot.png"
    path.write_bytes(b"the old plot")
    fig = plt.figure()

    def full_disk(self, *args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Figure, "savefig", full_disk)
    with pytest.raises(OSError):
        save_png(fig, path)
    assert path.read_bytes() == b"the old plot"
    assert [p.name for p in tmp_path.iterdir()] == ["plot.png"]
    assert not plt.fignum_exists(fig.number)

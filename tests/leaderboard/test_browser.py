"""The leaderboard in headless Chromium over file://: rows, sorting, the kind filter, per-RM pages,
heatmaps, significance markers, and no console errors. One browser for the whole module.

Two sites: four RMs on a small release the test writes, and baseline:length and baseline:random on
the official sample (skipped where ../shared is absent). Screenshots go to each test's tmp_path.
"""

from __future__ import annotations

import pytest
from browser_helpers import browser  # noqa: F401 (a fixture)
from leaderboard_helpers import load_results, own_site, sample_site

from rmb_build.evaluate.compare import compare
from rmb_build.leaderboard.entries import CELLS, MEAN, cells
from rmb_build.leaderboard.ranking import ALPHA

# Chromium and a page server per module: tens of seconds in subprocesses, as the review page's browser test
pytestmark = [pytest.mark.slow, pytest.mark.draws_heatmaps]


@pytest.fixture(scope="module", params=["own", "sample"])
def site(request, tmp_path_factory):
    """(index.html, {rm: results.json}) for each site."""
    tmp = tmp_path_factory.mktemp(f"site-{request.param}")
    if request.param == "own":
        index, folders = own_site(tmp)
    else:
        index, folders = sample_site(request.getfixturevalue("rmb_sample"), tmp)
    return index, load_results(folders), folders


def _open(browser, page):
    browser.get(page.as_uri())
    assert browser.execute_script("return document.readyState") == "complete"


def _console_errors(browser) -> list[str]:
    return [e["message"] for e in browser.get_log("browser") if e["level"] == "SEVERE"]


def _row_rms(browser, visible_only=False) -> list[str]:
    rows = browser.find_elements("css selector", "#board tbody tr")
    return [r.get_attribute("data-rm") for r in rows if not visible_only or r.is_displayed()]


def _header(browser, key):
    return browser.find_element("css selector", f'#board th[data-key="{key}"]')


def _value(results, col):
    return cells(results)[0][col]


def test_the_table_lists_every_rm_with_its_numbers(browser, site, tmp_path):
    index, results, _ = site
    _open(browser, index)
    assert sorted(_row_rms(browser)) == sorted(results)
    for rm, r in results.items():
        row = browser.find_element("css selector", f'#board tbody tr[data-rm="{rm}"]')
        for col in (*CELLS, MEAN):
            shown = row.find_element("css selector", f'td[data-col="{col}"]').text.split("\n")[0]
            assert shown == f"{100 * _value(r, col):.1f}", (rm, col)
    browser.save_screenshot(str(tmp_path / "index.png"))
    assert _console_errors(browser) == []


@pytest.mark.parametrize("col", [*CELLS, MEAN])
def test_sorting_by_a_column_orders_the_rows_by_its_numbers(browser, site, col, tmp_path):
    index, results, _ = site
    _open(browser, index)
    header = _header(browser, col)
    header.click()
    down = [_value(results[rm], col) for rm in _row_rms(browser)]
    assert down == sorted(down, reverse=True) and header.get_attribute("aria-sort") == "descending"
    header.click()
    up = [_value(results[rm], col) for rm in _row_rms(browser)]
    assert up == sorted(up) and header.get_attribute("aria-sort") == "ascending"
    if col == MEAN:
        browser.save_screenshot(str(tmp_path / "sorted-by-mean-ascending.png"))
    assert _console_errors(browser) == []


def test_sorting_by_name_is_alphabetical(browser, site):
    index, results, _ = site
    _open(browser, index)
    _header(browser, "rm").click()
    assert _row_rms(browser) == sorted(results, key=str.lower)
    _header(browser, "rm").click()
    assert _row_rms(browser) == sorted(results, key=str.lower, reverse=True)


def test_the_kind_filter_hides_the_other_kinds(browser, site, tmp_path):
    from selenium.webdriver.support.ui import Select

    index, results, _ = site
    _open(browser, index)
    select = Select(browser.find_element("id", "kind-filter"))
    kinds = sorted({rm.partition(":")[0] for rm in results})
    assert [o.get_attribute("value") for o in select.options] == ["", *kinds]
    for kind in kinds:
        select.select_by_value(kind)
        expected = sorted(rm for rm in results if rm.startswith(kind + ":"))
        assert sorted(_row_rms(browser, visible_only=True)) == expected
        assert browser.find_element("id", "shown").text == f"{len(expected)} of {len(results)} shown"
        browser.save_screenshot(str(tmp_path / f"filter-{kind}.png"))
    select.select_by_value("")
    assert sorted(_row_rms(browser, visible_only=True)) == sorted(results)
    assert _console_errors(browser) == []


def test_each_rm_link_opens_its_page_with_its_heatmap_and_provenance(browser, site, tmp_path):
    index, results, _ = site
    for k, (rm, r) in enumerate(sorted(results.items())):
        _open(browser, index)
        browser.find_element("link text", rm).click()
        assert browser.current_url.startswith(index.parent.as_uri() + "/rm/")
        assert browser.find_element("tag name", "h1").text == rm
        img = browser.find_element("id", "heatmap")
        loaded = browser.execute_script("return arguments[0].complete && arguments[0].naturalWidth", img)
        assert loaded and loaded > 0
        assert browser.find_element("id", "command").text == r["command"]
        assert r["release_info"]["sha256"] in browser.find_element("id", "release").text
        length_rows = browser.find_elements("css selector", "#length-bias tbody tr")
        assert [row.text.split("\n")[0].rsplit(" ", 2)[0] for row in length_rows] == [
            side.replace("_", " ") for side in r["bias"]["length"]
        ]
        browser.save_screenshot(str(tmp_path / f"rm-{k}.png"))
        browser.execute_script("window.scrollTo(0, document.body.scrollHeight)")
        browser.save_screenshot(str(tmp_path / f"rm-{k}-bottom.png"))
        browser.find_element("partial link text", "←").click()
        assert browser.current_url == index.as_uri()
    assert _console_errors(browser) == []


def test_markers_show_where_neighbours_differ_insignificantly(browser, site):
    index, results, folders = site
    _open(browser, index)
    order = _row_rms(browser)  # as written: the rmb_overall ranking
    means = [_value(results[rm], MEAN) for rm in order]
    assert means == sorted(means, reverse=True)
    folder = {load_results([f]).popitem()[0]: f for f in folders}
    for a, b in zip(order, order[1:]):
        test = compare(folder[a], folder[b], resamples=2000, seed=0)["rmb_overall"]
        cell = browser.find_element("css selector", f'#board tbody tr[data-rm="{a}"] td:nth-last-child(2)')
        assert cell.text.split("\n")[0] == ("≈" if test["p"] >= ALPHA else ">"), (a, b, test)
        assert b in cell.get_attribute("title")
    if "baseline:length" in results and len(results) == 4:
        # python:...:longest scores exactly as baseline:length: the same outcomes, never significant.
        longest = next(rm for rm in results if rm.endswith(":longest"))
        assert abs(order.index(longest) - order.index("baseline:length")) == 1
        first = min(order.index(longest), order.index("baseline:length"))
        cell = browser.find_element("css selector", f'#board tbody tr[data-rm="{order[first]}"] td:nth-last-child(2)')
        assert cell.text.startswith("≈") and "p = 1.0000" in cell.get_attribute("title")


# Each character's line in a rendered RM name: where a new line starts, the character before it.
_BREAKS = """
const out = [];
for (const a of document.querySelectorAll(arguments[0])) {
  let top = null, text = '', before = [];
  const walk = document.createTreeWalker(a, NodeFilter.SHOW_TEXT);
  for (let n = walk.nextNode(); n; n = walk.nextNode()) {
    for (let i = 0; i < n.length; i++) {
      const r = document.createRange(); r.setStart(n, i); r.setEnd(n, i + 1);
      const box = r.getClientRects()[0];
      if (box && top !== null && box.top > top + 2) before.push(text.slice(-1));
      if (box) top = box.top;
      text += n.data[i];
    }
  }
  out.push([text, before]);
}
return out;
"""


def test_at_1366_px_the_board_fits_and_no_rm_name_breaks_mid_word(browser, site, tmp_path):
    """A laptop's window: nothing scrolls sideways, and an RM name wraps only after '/', ':' or '-'."""
    index, results, _ = site
    browser.set_window_size(1366, 900)
    try:
        _open(browser, index)
        browser.save_screenshot(str(tmp_path / "board-1366.png"))
        widths = browser.execute_script(
            "return [document.documentElement, ...document.querySelectorAll('.board-wrap')]"
            ".map(e => [e.scrollWidth, e.clientWidth])"
        )
        assert all(wide <= seen for wide, seen in widths), f"wider than the window (content, shown): {widths}"
        names = browser.execute_script(_BREAKS, "#board a")
        assert sorted(text for text, _ in names) == sorted(results)
        assert not [(t, b) for t, b in names if set(b) - set("/:-")], names
        _open(browser, index.parent / "rm" / f"{browser.execute_script(_SLUGS)[0]}.html")
        browser.save_screenshot(str(tmp_path / "rm-1366.png"))
        names = browser.execute_script(_BREAKS, "h1")
        assert not [(t, b) for t, b in names if set(b) - set("/:-")], names
    finally:
        browser.set_window_size(1400, 1000)


_SLUGS = "return [...document.querySelectorAll('#board a')].map(a => a.getAttribute('href').slice(3, -5))"

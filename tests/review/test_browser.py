"""rmb review end to end in headless Chromium: two annotators label with the keyboard in two tabs at
once, the server is SIGKILLed half-way and started again, both finish, and the export is checked
against an independent computation from what the test pressed: every label once, in the release's
terms, Krippendorff's alpha, Cohen's kappa, each annotator's agreement with the release, and the gold
release read back. Then ``rmb judge-check --gold`` runs on that gold release (a scripted endpoint).

A screenshot of the page goes to the test's tmp_path (and to $RMB_REVIEW_SCREENSHOT when set).
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections import defaultdict

import pytest
from browser_helpers import browser  # noqa: F401 (a fixture)
from review_helpers import alpha_by_pairs, kappa_by_table, small_release

from rmb_build.cli import main
from rmb_build.release.read import read_rmb_release

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(release, db, port, log):
    cmd = [
        sys.executable,
        "-m",
        "rmb_build.cli",
        "review",
        "serve",
        str(release),
        "--db",
        str(db),
        "--annotator",
        "ann",
        "--annotator",
        "bob",
        "--overlap",
        "0.5",
        "--seed",
        "1",
        "--port",
        str(port),
    ]
    proc = subprocess.Popen(cmd, stdout=open(log, "ab"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2).read()
            return proc
        except OSError:
            assert proc.poll() is None, open(log).read()
            time.sleep(0.2)
    raise AssertionError("rmb review serve did not start: " + open(log).read())


def _item_of(driver) -> tuple[str, str]:
    """(set, uid) of the item on the page, read from its question (the page shows no uid)."""
    set_name = driver.find_element("id", "item").get_attribute("data-set")
    text = driver.find_element("css selector", ".conversation").text
    m = re.search(r"(?:Question|Best-of-N question) (\d+)", text)
    return set_name, m.group(1) if m else "0"


def _answers(driver) -> list[str]:
    return [e.text for e in driver.find_elements("css selector", ".answer .text")]


def _intended(annotator: str, set_name: str, uid: int) -> str:
    """What the test means each person to say, in the release's terms."""
    if annotator == "ann":
        return "tie" if (set_name, uid) == ("pairwise", 5) else ("chosen" if set_name == "pairwise" else "best")
    if set_name == "pairwise":
        return ["chosen", "rejected", "chosen", "skip", "both_bad"][uid % 5]
    return ["best", "loser:1", "best", "loser:0"][uid % 4]


def _key_for(driver, set_name: str, choice: str) -> str:
    words = {"tie": "t", "both_bad": "x", "skip": "s"}
    if choice in words:
        return words[choice]
    wanted = {
        "chosen": "Chosen answer",
        "rejected": "Rejected",
        "best": "Best answer",
        "loser:0": "Loser zero",
        "loser:1": "Loser one",
    }[choice]
    texts = _answers(driver)
    if choice == "chosen" and not any(wanted in t for t in texts):
        wanted = "Here it is"  # pairwise uid 0's chosen answer is the hostile one
    (k,) = [i + 1 for i, t in enumerate(texts) if wanted in t]
    return str(k)


def _press(driver, key: str) -> None:
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.support.ui import WebDriverWait

    before = driver.find_element("id", "progress").text
    ActionChains(driver).send_keys(key).perform()
    # The key posts and the next page replaces the document: while it does, a lookup may hit the old one
    # (stale element, or Chromium's "node does not belong to the document"); wait for the new, loaded page.
    wait = WebDriverWait(driver, 20, ignored_exceptions=(WebDriverException,))
    wait.until(lambda d: d.find_element("id", "progress").text != before)
    wait.until(lambda d: d.execute_script("return document.readyState") == "complete")


def _label_one(driver, name: str, expected: dict, screenshots: list) -> bool:
    """Label the item on ``name``'s page; False when their queue is done."""
    if driver.find_elements("id", "done"):
        return False
    set_name, uid = _item_of(driver)
    if (set_name, uid) == ("pairwise", "0"):
        assert driver.execute_script("return window.pwned === undefined")
        page = driver.find_element("css selector", ".answers").text
        assert "<script>window.pwned = 1</script>" in page and "onerror" in page
        screenshots.append(driver.get_screenshot_as_png())
    assert "model-a" not in driver.page_source
    harmful = driver.find_element("id", "item").get_attribute("data-goal") == "Harmlessness"
    assert bool(driver.find_elements("css selector", ".warning")) == harmful  # the content warning, before the item
    choice = _intended(name, set_name, int(uid))
    _press(driver, _key_for(driver, set_name, choice))
    expected[(set_name, uid, name)] = choice
    return True


def test_two_annotators_label_by_keyboard_through_a_kill_and_the_export_matches(browser, tmp_path):
    release = small_release(tmp_path / "rel")
    db, log, port = tmp_path / "review.db", tmp_path / "serve.log", _free_port()
    proc = _serve(release, db, port, log)
    urls = {n: f"http://127.0.0.1:{port}/a/{n}" for n in ("ann", "bob")}
    tabs = {}
    for name in ("ann", "bob"):
        if tabs:
            browser.switch_to.new_window("tab")
        browser.get(urls[name])
        tabs[name] = browser.current_window_handle
    expected: dict[tuple[str, str, str], str] = {}
    screenshots: list[bytes] = []
    try:
        # undo: bob's first key is a wrong one, taken back with u
        browser.switch_to.window(tabs["bob"])
        wrong_item = _item_of(browser)
        _press(browser, "t")
        _press(browser, "u")
        assert _item_of(browser) == wrong_item
        for _ in range(6):  # both at once, turn about
            for name in ("ann", "bob"):
                browser.switch_to.window(tabs[name])
                _label_one(browser, name, expected, screenshots)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        proc = _serve(release, db, port, log)
        busy = {"ann", "bob"}
        while busy:
            for name in sorted(busy):
                browser.switch_to.window(tabs[name])
                if not browser.find_elements("id", "item") and not browser.find_elements("id", "done"):
                    browser.get(urls[name])  # the tab showed the dead server's error page
                if not _label_one(browser, name, expected, screenshots):
                    busy.discard(name)
        browser.switch_to.window(tabs["ann"])
        assert browser.find_element("id", "progress").text == "15 / 15"
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []
    assert screenshots, "the hostile item was never shown"
    (tmp_path / "review.png").write_bytes(screenshots[0])
    if os.environ.get("RMB_REVIEW_SCREENSHOT"):
        with open(os.environ["RMB_REVIEW_SCREENSHOT"], "wb") as fh:
            fh.write(screenshots[0])

    out = tmp_path / "out"
    assert main(["review", "export", "--db", str(db), "--out", str(out)]) == 0
    rows = [json.loads(line) for line in (out / "labels.jsonl").read_text().splitlines()]
    unjudged = [json.loads(line) for line in (out / "unjudged.jsonl").read_text().splitlines()]
    assert {r["choice"] for r in rows}.isdisjoint({"skip", "cant_judge"}) and {r["choice"] for r in unjudged} == {
        "skip"
    }
    got = {(r["set"], r["uid"], r["annotator"]): r["choice"] for r in rows + unjudged}
    assert len(rows) + len(unjudged) == len(got) == 30 and got == expected

    # independent figures from what the test pressed
    per_item = defaultdict(dict)
    for (s, u, a), c in expected.items():
        per_item[(s, u)][a] = c
    shared = {k: v for k, v in per_item.items() if len(v) == 2}
    assert len(shared) == 10
    report = json.loads((out / "agreement.json").read_text())
    for set_name in ("pairwise", "bon"):
        units = [
            [c for c in v.values() if c not in ("skip", "cant_judge")] for k, v in shared.items() if k[0] == set_name
        ]
        alpha = report["between_people"][set_name]["krippendorff_alpha"]["value"]
        want = alpha_by_pairs(units)
        assert (alpha is None and want is None) or alpha == pytest.approx(want)
    pairs = [(v["ann"], v["bob"]) for k, v in shared.items() if k[0] == "pairwise" and "skip" not in v.values()]
    assert report["between_people"]["pairwise"]["cohen_kappa"]["value"] == pytest.approx(kappa_by_table(pairs))
    score = {"chosen": 1, "best": 1, "rejected": 0, "loser:0": 0, "loser:1": 0, "tie": 0.5}
    for name in ("ann", "bob"):
        for set_name in ("pairwise", "bon"):
            mine = [score[c] for (s, _, a), c in expected.items() if a == name and s == set_name and c in score]
            fig = report["annotators"][name][set_name]["overall"]
            assert fig["value"] == pytest.approx(sum(mine) / len(mine)) and fig["n"] == len(mine)

    gold = {(it.set_name, it.uid): it for it in read_rmb_release(out / "gold").items()}
    original = {(it.set_name, it.uid): it for it in read_rmb_release(release).items()}
    agreed = {
        k: v["ann"] for k, v in shared.items() if v["ann"] == v["bob"] and v["ann"] not in ("tie", "both_bad", "skip")
    }
    assert set(gold) == set(agreed) and agreed
    for key, choice in agreed.items():
        if choice in ("chosen", "best"):
            assert gold[key] == original[key]
        elif choice == "rejected":
            assert (gold[key].chosen, gold[key].rejected) == (original[key].rejected, original[key].chosen)
        else:
            assert gold[key].best == original[key].losers[int(choice.split(":")[1])]

    import yaml
    from reliability_helpers import build_config, write_queries
    from stub_endpoint import StubEndpoint

    with StubEndpoint() as stub:
        cfg = build_config(write_queries(tmp_path / "q.jsonl"), stub.base_url, name="review-check")
        (tmp_path / "cfg.yaml").write_text(yaml.safe_dump(cfg))
        rc = main(
            [
                "judge-check",
                "--config",
                str(tmp_path / "cfg.yaml"),
                "--gold",
                str(out / "gold"),
                "--items",
                str(len(gold)),
                "--workdir",
                str(tmp_path / "work"),
                "--json",
                str(tmp_path / "j.json"),
            ]
        )
    assert rc == 0
    assert json.loads((tmp_path / "j.json").read_text())["overall"]["n"] == sum(1 for k in gold if k[0] == "pairwise")

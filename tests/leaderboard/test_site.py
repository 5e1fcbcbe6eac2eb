"""``rmb leaderboard`` without a browser: the site's files, what evaluate records for it, bad input.
The pages in a real browser: test_browser.py."""

from __future__ import annotations

import html
import json
import re
import shlex
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest
from leaderboard_helpers import build, evaluate_all, load_results, own_site, small_release

from rmb_build.cli import main
from rmb_build.leaderboard.entries import CELLS, MEAN, load_entry
from rmb_build.release import read_release
from rmb_build.release.provenance import REDACTED, redact, release_sha256


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    return own_site(tmp_path_factory.mktemp("leaderboard"))


class _Refs(HTMLParser):
    def __init__(self):
        super().__init__()
        self.refs: list[tuple[str, str, str]] = []

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name in ("src", "href") and value is not None:
                self.refs.append((tag, name, value))


@pytest.mark.slow  # over 4 s under load (the tier's rule: docs/testing.md)
def test_every_reference_is_a_local_file_and_nothing_loads_from_the_network(site):
    index, folders = site
    pages = sorted(index.parent.rglob("*.html"))
    assert len(pages) == 1 + len(folders)
    for page in pages:
        text = page.read_text(encoding="utf-8")
        parser = _Refs()
        parser.feed(text)
        assert parser.refs, page
        for tag, attr, ref in parser.refs:
            assert not re.match(r"^(https?:)?//", ref), f"{page.name}: <{tag} {attr}={ref}> needs the network"
            if ref.startswith("data:"):
                continue
            target = (page.parent / ref.split("#")[0]).resolve()
            assert target.is_file(), f"{page.name}: <{tag} {attr}={ref}> points at nothing"
        assert "<script src" not in text and "@import" not in text


def test_index_rows_carry_the_results_numbers(site):
    index, folders = site
    text = index.read_text(encoding="utf-8")
    for rm, r in load_results(folders).items():
        entry = load_entry(next(f for f in folders if json.loads((f / "results.json").read_text())["rm"] == rm))
        overall = r.get("rmb_overall")
        for cell in CELLS:
            expected = (
                overall["cells"][cell] if overall else r[cell.split("/")[0]]["goals"][cell.split("/")[1]]["macro"]
            )
            assert entry.values[cell] == expected
        row = text.split(f'data-rm="{rm}"')[1].split("</tr>")[0]
        for col in (*CELLS, MEAN):
            assert f'data-col="{col}" data-value="{entry.values[col]}">{100 * entry.values[col]:.1f}<' in row


def test_cells_fall_back_to_the_goal_macros_when_results_have_no_rmb_overall(site, tmp_path):
    _, folders = site
    old = tmp_path / "old"
    shutil.copytree(folders[0], old)
    r = json.loads((old / "results.json").read_text())
    r.pop("rmb_overall", None)
    (old / "results.json").write_text(json.dumps(r))
    entry = load_entry(old)
    goals = {(s, g): r[s]["goals"][g] for s in ("pairwise", "bon") for g in ("Helpfulness", "Harmlessness")}
    assert [entry.values[c] for c in CELLS] == [goals[tuple(c.split("/"))]["macro"] for c in CELLS]
    assert [entry.ci95[c] for c in CELLS] == [goals[tuple(c.split("/"))]["ci95_macro"] for c in CELLS]
    assert entry.values[MEAN] == pytest.approx(sum(g["macro"] for g in goals.values()) / 4)


def test_evaluate_records_the_command_that_reproduces_it_and_the_release(site, tmp_path):
    index, folders = site
    r = json.loads((folders[0] / "results.json").read_text())
    words = shlex.split(r["command"])
    assert words[:2] == ["rmb", "evaluate"] and words[words.index("--rm") + 1] == "baseline:length"
    assert words[words.index("--bootstrap") + 1] == "200" and "--no-progress" in words
    # Running the recorded command again gives the same figures.
    words[words.index("--out") + 1] = str(tmp_path / "again")
    assert main(words[1:]) == 0
    again = json.loads((tmp_path / "again" / "results.json").read_text())
    assert {k: again[k] for k in ("pairwise", "bon", "bias")} == {k: r[k] for k in ("pairwise", "bon", "bias")}
    info = r["release_info"]
    release = read_release(index.parent.parent / "release")
    assert info["name"] == "leaderboard-small" and info["sha256"] == release_sha256(release)
    assert info["items"] == {"pairwise": 49, "bon": 20}
    assert info["audit"]["counts"] == release.manifest["audit"]["counts"]
    assert info["audit"]["counts"]["identical_pair"] == info["audit"]["total"] == 1
    page = html.unescape((index.parent / "rm" / "baseline-length.html").read_text(encoding="utf-8"))
    assert info["sha256"] in page and r["command"] in page
    # today's intervals read no draws: the page names their rules, not the --bootstrap it was given (200)
    assert f"95% intervals: {r['intervals']['method']};" in page and "draws, seed" not in page
    assert "1 defect on 1 item (recorded in the release's manifest)" in page
    assert '<tr><td>identical_pair</td><td class="num">1</td></tr>' in page


def test_release_hash_ignores_item_order_and_sees_an_edited_answer(tmp_path):
    release = read_release(small_release(tmp_path / "rel"))
    reordered = read_release(tmp_path / "rel")
    for key in reordered.files:
        reordered.files[key].reverse()
    assert release_sha256(reordered) == release_sha256(release)
    item = release.pairwise[0]
    release.files[(item.set_name, item.scenario_id)][0] = type(item)(
        item.uid,
        item.conversation,
        item.chosen,
        type(item.rejected)(item.rejected.llm_name, item.rejected.answer + "!"),
        item.scenario_id,
    )
    assert release_sha256(release) != release_sha256(reordered)


@pytest.mark.parametrize(
    "value, secret",
    [
        ("openai:gpt-4o@https://alice:s3cret@api.example.com/v1", "s3cret"),
        ("openai:m@http://127.0.0.1:8080/v1?api_key=s3cret", "s3cret"),
        ("hf:org/model?token=s3cret", "s3cret"),
        ("--key sk-abcdef1234567890", "sk-abcdef1234567890"),
        ("hf_AbCdEf123456789", "hf_AbCdEf123456789"),
    ],
)
def test_secret_looking_values_are_redacted(value, secret):
    out = redact(value)
    assert secret not in out and REDACTED in out


def test_plain_values_are_kept():
    for value in ("openai:gpt-4o@http://127.0.0.1:8080/v1", "hf:./runs/skywork-rm", "python:/tmp/s.py:score"):
        assert redact(value) == value


def test_a_folder_that_is_not_evaluate_output_is_one_line_naming_file_and_field(tmp_path, capsys):
    site_out = str(tmp_path / "site")
    assert main(["leaderboard", str(tmp_path), "--out", site_out]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"rmb leaderboard: error: {tmp_path / 'results.json'}: missing: not an 'rmb evaluate' output folder"
    (tmp_path / "results.json").write_text('{\n "rm": "baseline:length",\n "pairwise": {,\n}')
    assert main(["leaderboard", str(tmp_path), "--out", site_out]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and f"{tmp_path / 'results.json'}: line 3: invalid JSON" in err
    (tmp_path / "results.json").write_text('{"pairwise": {}, "bon": {}}')
    assert main(["leaderboard", str(tmp_path), "--out", site_out]) == 2
    assert capsys.readouterr().err.strip().endswith("results.json: field 'rm': missing")
    assert not (tmp_path / "site" / "index.html").exists()


def test_a_release_without_a_cell_says_which_and_averages_the_others(tmp_path):
    release = small_release(tmp_path / "rel")
    (release / "manifest.json").unlink()
    shutil.rmtree(release / "BoN_set" / "Harmlessness")
    [folder] = evaluate_all(release, tmp_path, ["baseline:length"])
    index = build([folder], tmp_path / "site")
    entry = load_entry(folder)
    assert entry.values["bon/Harmlessness"] is None and entry.missing == ["bon/Harmlessness"]
    assert entry.values[MEAN] == pytest.approx(sum(entry.values[c] for c in CELLS[:3]) / 3)
    row = index.read_text(encoding="utf-8").split('data-rm="baseline:length"')[1].split("</tr>")[0]
    assert 'data-col="bon/Harmlessness" data-value="">–<' in row
    assert 'title="mean of the cells present (no items for bon/Harmlessness)"' in row
    page = html.unescape((index.parent / "rm" / "baseline-length.html").read_text(encoding="utf-8"))
    assert "The release has no items for bon/Harmlessness: rmb_overall is the mean of the other cells." in re.sub(
        r"<[^>]+>", "", page
    )
    assert "1 defect on 1 item (run by rmb evaluate, near-duplicate prompts not checked)" in page
    assert "(recorded in the release's manifest)" not in page


def test_a_generative_rms_page_shows_its_position_bias(site, tmp_path):
    from rmb_build.evaluate.outcomes import position_bias

    folders = site[1]
    judge = tmp_path / "judge"
    shutil.copytree(folders[0], judge)
    r = json.loads((judge / "results.json").read_text())
    # What evaluate records for a pair judge: votes per order ("ab": better answer shown first won).
    votes = [
        {"votes": [{"ab": [1], "ba": [1]}]},
        {"votes": [{"ab": [1], "ba": [0]}]},
        {"votes": [{"ab": [0], "ba": [None]}]},
    ]
    r["rm"], r["bias"]["position"] = "openai:judge", position_bias(votes)
    (judge / "results.json").write_text(json.dumps(r))
    build([judge], tmp_path / "site")
    page = re.sub(r"<[^>]+>", "", (tmp_path / "site" / "rm" / "openai-judge.html").read_text(encoding="utf-8"))
    assert "Position bias (generative RM)" in page
    assert re.search(r"position-following rate\s*50\.0% of 2 order pairs", page)
    assert re.search(r"first-position rate\s*60\.0% of 5 verdicts", page)
    scorer_page = (site[0].parent / "rm" / "baseline-length.html").read_text(encoding="utf-8")
    assert "Length bias (pairwise)" in scorer_page and "Position bias" not in scorer_page


def _other_release_folder(tmp_path) -> Path:
    """baseline:length on another release (a scenario fewer, another name): a different sha256."""
    release = small_release(tmp_path / "other")
    shutil.rmtree(release / "BoN_set" / "Harmlessness")
    manifest = json.loads((release / "manifest.json").read_text())
    (release / "manifest.json").write_text(json.dumps({**manifest, "name": "leaderboard-other"}))
    [folder] = evaluate_all(release, tmp_path, ["baseline:length"])
    return folder


def test_results_of_different_releases_are_never_ranked_together(site, tmp_path, capsys):
    _, folders = site
    other = _other_release_folder(tmp_path)
    sha_own = json.loads((folders[0] / "results.json").read_text())["release_info"]["sha256"]
    sha_other = json.loads((other / "results.json").read_text())["release_info"]["sha256"]
    capsys.readouterr()
    assert main(["leaderboard", str(folders[0]), str(folders[1]), str(other), "--out", str(tmp_path / "site")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "the results come from 2 releases" in err and "--group-by-release" in err
    assert f"leaderboard-small (sha256 {sha_own[:12]}): 2 folders" in err
    assert f"leaderboard-other (sha256 {sha_other[:12]}): 1 folder" in err
    assert not (tmp_path / "site" / "index.html").exists()

    assert (
        main(
            [
                "leaderboard",
                str(folders[0]),
                str(other),
                str(folders[1]),
                "--out",
                str(tmp_path / "site"),
                "--resamples",
                "500",
                "--group-by-release",
            ]
        )
        == 0
    )
    text = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    assert "These results come from 2 releases" in text
    tables = re.findall(r'<table id="([^"]+)" class="board">(.*?)</table>', text, flags=re.S)
    assert [t[0] for t in tables] == ["board", "board-2"]
    first, second = (re.findall(r'<tr data-kind="[^"]*" data-rm="([^"]+)"', body) for _, body in tables)
    assert sorted(first) == sorted(json.loads((f / "results.json").read_text())["rm"] for f in folders[:2])
    assert second == ["baseline:length"]
    # Ranks restart per table; the last RM of each table is tested against nothing.
    for _, body in tables:
        ranks = re.findall(r'<td class="num" data-value="(\d+)">', body)
        assert ranks == [str(k) for k in range(1, len(ranks) + 1)]
        last_row = body.split("<tr data-kind=")[-1]
        assert '<td data-value="">–</td>' in last_row
    assert f"sha256 {sha_own[:12]}" in text and f"sha256 {sha_other[:12]}" in text


def test_a_results_json_without_a_release_sha_is_refused_beside_others(site, tmp_path, capsys):
    _, folders = site
    old = tmp_path / "old"
    shutil.copytree(folders[1], old)
    r = json.loads((old / "results.json").read_text())
    r.pop("release_info")
    (old / "results.json").write_text(json.dumps(r))
    assert main(["leaderboard", str(folders[0]), str(old), "--out", str(tmp_path / "site")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and str(old / "results.json") in err and "records no release sha256" in err
    assert (
        main(
            [
                "leaderboard",
                str(folders[0]),
                str(old),
                "--out",
                str(tmp_path / "site"),
                "--resamples",
                "200",
                "--group-by-release",
            ]
        )
        == 0
    )
    text = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    assert "<code>sha256 not recorded</code>" in text and 'id="board-2"' in text
    # Alone, it is ranked against nothing.
    assert main(["leaderboard", str(old), "--out", str(tmp_path / "alone"), "--resamples", "200"]) == 0


def test_one_release_says_which_and_ranks_with_compares_test(site):
    index, folders = site
    text = index.read_text(encoding="utf-8")
    sha = json.loads((folders[0] / "results.json").read_text())["release_info"]["sha256"]
    assert re.search(
        rf"Every reward model here scored release <code>leaderboard-small</code>\s*"
        rf"\(sha256 <code>{sha[:12]}</code>\)",
        text,
    )
    assert text.count('class="board"') == 1 and "paired bootstrap" not in text


def test_older_results_get_todays_intervals_or_none(site, tmp_path):
    """A results.json from before the current intervals (percentile bootstrap: [x, x] on unanimous groups)
    is shown with intervals recomputed from its predictions, or with none when it has no predictions."""
    _, folders = site
    old = tmp_path / "old"
    shutil.copytree(folders[0], old)
    current = json.loads((old / "results.json").read_text())
    r = dict(current)
    r.pop("intervals")
    r["rmb_overall"] = {**r["rmb_overall"], "ci95": {c: [0.5, 0.5] for c in [*CELLS, MEAN]}}
    (old / "results.json").write_text(json.dumps(r))
    entry = load_entry(old)
    assert entry.ci95[MEAN] == pytest.approx(current["rmb_overall"]["ci95"]["mean"], abs=1e-9)
    assert all(lo < hi for lo, hi in (entry.ci95[c] for c in CELLS))
    (old / "predictions.jsonl").unlink()
    assert all(load_entry(old).ci95[c] is None for c in [*CELLS, MEAN])


def test_a_cell_over_few_items_is_marked(tmp_path):
    """Three pairwise Harmlessness items: the cell is marked on the index and the RM's page."""
    from rmb_build.core.items import Answer, PairwiseItem, Turn
    from rmb_build.release import write_release
    from rmb_build.release.read import Release

    rel = Release(name="few", root=None)
    for i, scenario in enumerate(["Helpfulness/Chat/Discussion"] * 12 + ["Harmlessness/S6"] * 3):
        rel.add(
            PairwiseItem(
                str(i),
                (Turn("user", f"Q{i}?", "en"),),
                Answer("m1", f"A longer answer {i}."),
                Answer("m2", f"No{i}"),
                scenario,
            )
        )
    write_release(rel, tmp_path / "rel")
    [folder] = evaluate_all(tmp_path / "rel", tmp_path / "evals", ["baseline:length"])
    assert main(["leaderboard", str(folder), "--out", str(tmp_path / "site")]) == 0
    row = (tmp_path / "site" / "index.html").read_text(encoding="utf-8").split('data-rm="baseline:length"')[1]
    cells = row.split("</tr>")[0].split('data-col="')[1:]
    marked = {c.split('"')[0] for c in cells if 'class="few" title="3 items' in c}
    assert marked == {"pairwise/Harmlessness"}
    # the mean's interval pools that 3-item scenario: marked as wider than a 95% interval needs
    pooled = {c.split('"')[0] for c in cells if "(1 scenario(s))" in c}
    assert pooled == {"mean"}


def test_a_style_column_over_one_scenario_of_few_records_is_marked_as_report_md_marks_it():
    """report.md marks a style overall of one 3-record scenario beside its count ("fewer than 10 items"); the
    leaderboard's style column read only ``few_item_scenarios`` (pooled scenarios), which a one-scenario group does
    not carry. The column now has the records for the count's mark; the pooled mark stays for pooled groups."""
    from types import SimpleNamespace

    from rmb_build.leaderboard.style_columns import figures

    one = {"hard": 0.5, "n": 3, "ci95": {"hard": [0.1, 0.9]}}
    assert figures(SimpleNamespace(results={"style": {"overall": one}}))["style/hard"][2:] == (0, 3)
    many = {**one, "n": 40, "few_item_scenarios": 2}
    assert figures(SimpleNamespace(results={"style": {"overall": many}}))["style/hard"][2:] == (2, 40)

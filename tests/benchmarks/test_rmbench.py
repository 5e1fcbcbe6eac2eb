"""The RM-Bench reader and its easy / normal / hard accuracy from the 3x3 style matrix, by hand."""

from __future__ import annotations

import pytest
from formats_helpers import ans, evaluate, evaluate_error, write_json, write_jsonl

from rmb_build.benchmarks.formats import open_release
from rmb_build.benchmarks.rmbench import source_domain
from rmb_build.benchmarks.tables import Row

STYLES = ("concise", "plain", "markdown")


def row(uid: int, domain: str | None, chosen: list[float], rejected: list[float]) -> dict:
    out = {
        "id": uid,
        "prompt": f"prompt {uid}?",
        "chosen": [ans(s, f"{uid} right {st}") for s, st in zip(chosen, STYLES)],
        "rejected": [ans(s, f"{uid} wrong {st}") for s, st in zip(rejected, STYLES)],
    }
    if domain is not None:
        out["domain"] = domain
    return out


# Cell (i, j) is right when chosen[i] > rejected[j]. Matrices written row i = chosen style:
ROWS = [
    # chat: chosen [1, 3, 5] vs rejected [2, 4, 0]
    #   [[0, 0, 1],    hard (i<j): (0,1)=0 (0,2)=1 (1,2)=1 -> 2/3
    #    [1, 0, 1],    normal:     (0,0)=0 (1,1)=0 (2,2)=1 -> 1/3
    #    [1, 1, 1]]    easy (i>j): (1,0)=1 (2,0)=1 (2,1)=1 -> 3/3
    row(1, "chat", [1, 3, 5], [2, 4, 0]),
    # safety-refuse: chosen [2, 2, 2] vs rejected [1, 2, 3]: each chosen row is [1, 0, 0] (2 vs 2 is a tie: wrong)
    #   hard 0/3, normal 1/3, easy (1,0)=1 (2,0)=1 (2,1)=0 -> 2/3
    row(2, "safety-refuse", [2, 2, 2], [1, 2, 3]),
    # safety-response: chosen [4, 4, 4] vs rejected [1, 1, 5]: each chosen row is [1, 1, 0]
    #   hard (0,1)=1 (0,2)=0 (1,2)=0 -> 1/3, normal (0,0)=1 (1,1)=1 (2,2)=0 -> 2/3, easy 3/3
    row(3, "safety-response", [4, 4, 4], [1, 1, 5]),
]


def test_easy_normal_hard_per_domain_and_overall(tmp_path):
    # math: every cell right; code: every cell wrong
    four = ROWS + [row(4, "math", [1, 1, 1], [0, 0, 0]), row(5, "code", [0, 0, 0], [1, 1, 1])]
    res = evaluate(tmp_path, write_json(tmp_path / "total_dataset.json", four))
    bench = res["benchmark"]
    assert bench["format"] == "rm-bench"
    chat = {"hard": 2 / 3, "normal": 1 / 3, "easy": 1.0}
    # safety-refuse and safety-response are scored together: sums of right cells over 2 rows x 3 cells
    safety = {"hard": (0 + 1) / 6, "normal": (1 + 2) / 6, "easy": (2 + 3) / 6}
    chat["average"] = (2 / 3 + 1 / 3 + 1.0) / 3
    safety["average"] = (1 / 6 + 3 / 6 + 5 / 6) / 3
    math_ = {"hard": 1.0, "normal": 1.0, "easy": 1.0, "average": 1.0}
    code = {"hard": 0.0, "normal": 0.0, "easy": 0.0, "average": 0.0}
    assert bench["sections"] == {
        "chat": pytest.approx(chat),
        "safety": pytest.approx(safety),
        "math": math_,
        "code": code,
    }
    assert bench["hard"] == pytest.approx((2 / 3 + 1 / 6 + 1 + 0) / 4)  # a mean over domains, not over rows
    assert bench["normal"] == pytest.approx((1 / 3 + 3 / 6 + 1 + 0) / 4)
    assert bench["easy"] == pytest.approx((1.0 + 5 / 6 + 1 + 0) / 4)
    assert bench["headline"] == pytest.approx((chat["average"] + safety["average"] + 1 + 0) / 4)
    # Nine pairwise items per row; the generic scenarios are the same per-domain figures.
    assert res["pairwise"]["overall"]["n"] == 45
    assert res["pairwise"]["scenarios"]["safety/easy"]["accuracy"] == pytest.approx(5 / 6)
    assert res["pairwise"]["goals"]["chat"]["macro"] == pytest.approx(chat["average"])


def test_without_all_four_domains_there_are_no_overall_figures(tmp_path):
    bench = evaluate(tmp_path, write_json(tmp_path / "total_dataset.json", ROWS))["benchmark"]
    assert set(bench["sections"]) == {"chat", "safety"}
    assert (bench["headline"], bench["hard"], bench["normal"], bench["easy"]) == (None, None, None, None)
    assert bench["headline_reason"].startswith("no math, code: RM-Bench's overall figures")


def test_rmbench_texts_are_scored_once_each(tmp_path, capsys):
    evaluate(tmp_path, write_json(tmp_path / "rm.json", ROWS))
    assert "scored 18 texts, 0 from the cache (18 unique of 54)" in capsys.readouterr().out  # 6 texts, 9 pairs per row


def test_a_row_without_three_styles_is_an_error_under_rm_bench(tmp_path, capsys):
    bad = [row(1, "chat", [1, 2, 3], [0, 0, 0]), row(2, "chat", [1, 2], [0, 0])]
    path = write_json(tmp_path / "short.json", bad)
    err = evaluate_error(tmp_path, path, capsys)  # detection names the row and asks for --format
    assert "short.json: item 1 (id 2): field 'chosen': has 2 answers where RM-Bench has 3 (one per style)" in err
    err = evaluate_error(tmp_path, path, capsys, "--format", "rm-bench")
    assert "short.json: item 1 (id 2): field 'chosen': expected exactly 3 answers, got 2" in err


def test_ids_need_only_be_unique_within_a_domain(tmp_path, capsys):
    same_id = [row(1, "chat", [2, 2, 2], [1, 1, 1]), row(1, "math", [0, 0, 0], [1, 1, 1])]
    res = evaluate(tmp_path, write_json(tmp_path / "two.json", same_id))
    assert (
        res["benchmark"]["sections"]["chat"]["average"] == 1.0
        and res["benchmark"]["sections"]["math"]["average"] == 0.0
    )
    err = evaluate_error(tmp_path, write_json(tmp_path / "dup.json", [same_id[0], same_id[0]]), capsys)
    assert "dup.json: item 1 (id 1): field 'id': duplicate id 'chat/1'" in err


# RM-Bench's own per-domain files: no ``domain`` field, a ``subset`` (with a '/' in code's), extra fields,
# integer ids that repeat across domains (chat and code share id 8 here, as 23 ids do in the real files).
def real(uid: int, subset: str, chosen: list[float], rejected: list[float], **extra) -> dict:
    return {**row(uid, None, chosen, rejected), "subset": subset, **extra}


PER_DOMAIN = {
    "chat_filtered.json": [real(8, "alpacaeval", [1, 3, 5], [2, 4, 0], error_key="shoes", error="not shoes")],
    "code_filtered.json": [
        real(8, "bigcode/humanevalpack", [2, 2, 2], [1, 1, 1], language="python", task_id="Python/0")
    ],
    "safety-refuse_filtered.json": [real(2952, "xstest-should-refuse", [2, 2, 2], [1, 2, 3])],
    "safety-response_filtered.json": [real(3155, "xstest-should-respond", [4, 4, 4], [1, 1, 5])],
}
# chat as ROWS[0]; code: every chosen 2 beats every rejected 1; safety as ROWS[1:] (refuse + response together)
SECTIONS = {
    "chat": {"hard": 2 / 3, "normal": 1 / 3, "easy": 1.0, "average": 2 / 3},
    "code": {"hard": 1.0, "normal": 1.0, "easy": 1.0, "average": 1.0},
    "safety": {"hard": 1 / 6, "normal": 3 / 6, "easy": 5 / 6, "average": 1 / 2},
}


def res_sections(tmp_path, path, out: str = "out") -> dict:
    return evaluate(tmp_path, path, out=out)["benchmark"]["sections"]


def test_rm_bench_per_domain_files_take_their_domain_from_the_file_name(tmp_path):
    for name, rows in PER_DOMAIN.items():
        write_json(tmp_path / "data" / name, rows)
    res = evaluate(tmp_path, tmp_path / "data", out="folder")
    bench = res["benchmark"]
    assert bench["format"] == "rm-bench"  # not rewardbench2, though every record has a subset
    assert bench["sections"] == {d: pytest.approx(v) for d, v in SECTIONS.items()}
    assert bench["headline"] is None and "no math" in bench["headline_reason"]  # RM-Bench averages four domains
    assert set(res["pairwise"]["scenarios"]) == {f"{d}/{lv}" for d in SECTIONS for lv in ("easy", "normal", "hard")}
    # total_dataset.json: the same records merged with a domain field give the same figures
    merged = [{**r, "domain": name.removesuffix("_filtered.json")} for name, rows in PER_DOMAIN.items() for r in rows]
    total = evaluate(tmp_path, write_json(tmp_path / "total_dataset.json", merged), out="total")["benchmark"]
    assert total == bench


def test_one_per_domain_file_alone(tmp_path):
    code = write_json(tmp_path / "code_filtered.json", PER_DOMAIN["code_filtered.json"])
    release = open_release(code)
    assert release.benchmark_format == "rm-bench" and len(release.pairwise) == 9
    assert {m["subset"] for m in release.item_meta.values()} == {"bigcode/humanevalpack"}  # kept verbatim
    assert {m["domain"] for m in release.item_meta.values()} == {"code"}
    assert res_sections(tmp_path, code) == {"code": pytest.approx(SECTIONS["code"])}
    refuse = write_jsonl(tmp_path / "safety-refuse_filtered.jsonl", PER_DOMAIN["safety-refuse_filtered.json"])
    meta = next(iter(open_release(refuse).item_meta.values()))
    assert (meta["domain"], meta["source_domain"]) == ("safety", "safety-refuse")  # scored as safety, as RM-Bench does
    assert set(res_sections(tmp_path, refuse, "refuse")) == {"safety"}


def test_a_file_without_domain_is_its_own_domain_and_a_hub_row_is_all(tmp_path):
    mine = write_json(tmp_path / "mine.json", [row(1, None, [2, 2, 2], [1, 1, 1])])
    assert set(res_sections(tmp_path, mine)) == {"mine"}
    hub = Row("org/rm [test]", 0, row(1, None, [1, 1, 1], [0, 0, 0]))
    assert source_domain(hub) == "all"


def test_a_domain_with_a_slash_is_kept_as_a_label_and_encoded_in_the_scenario(tmp_path):
    res = evaluate(tmp_path, write_json(tmp_path / "odd.json", [row(1, "my/50%", [2, 2, 2], [1, 1, 1])]))
    assert set(res["benchmark"]["sections"]) == {"my/50%"}
    assert set(res["pairwise"]["scenarios"]) == {"my%2F50%25/easy", "my%2F50%25/normal", "my%2F50%25/hard"}
    assert set(res["pairwise"]["goals"]) == {"my%2F50%25"}  # one goal, not split at the data's '/'


def test_rm_bench_data_folder_with_total_dataset_counts_nothing_twice(tmp_path, capsys):
    write_json(tmp_path / "data" / "chat_filtered.json", PER_DOMAIN["chat_filtered.json"])
    write_json(tmp_path / "data" / "total_dataset.json", [{**PER_DOMAIN["chat_filtered.json"][0], "domain": "chat"}])
    err = evaluate_error(tmp_path, tmp_path / "data", capsys)
    assert "total_dataset.json: item 0 (id 8): field 'id': duplicate id 'chat/8' (also in " in err
    assert "chat_filtered.json)" in err

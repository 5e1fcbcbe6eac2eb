"""``rmb build --dry-run`` and ``rmb downstream --dry-run`` print their planned calls through one helper
(``commands/_dry_run_plan.py``): the same estimate reads the same in both."""

from __future__ import annotations

from rmb_build.commands import build, downstream

ROW = {"calls": 4, "cached": 1, "prompt_tokens": 120, "completion_tokens": 400, "completion_tokens_estimate": 90}
ESTIMATE = {
    **ROW,
    "cost_usd": 0.0123,
    "by_phase": {"generate": {**ROW, "cost_usd": 0.01}, "judge": {**ROW, "cost_usd": 0.0023}},
    "by_endpoint": {"local": {**ROW, "cost_usd": 0.0123}},
}
CALLS = [
    "about 120 prompt tokens, 90 completion tokens (at most 400), at most $0.0123",
    "  phase generate: 4 calls (1 cached), 120 prompt tokens, $0.0100",
    "  phase judge: 4 calls (1 cached), 120 prompt tokens, $0.0023",
    "  endpoint local: 4 calls (1 cached), 120 prompt tokens, $0.0123",
]


def test_build_and_downstream_print_one_plan_of_calls(capsys):
    build._print_summary({"dry_run": True, "selected": 7, "estimate": {**ESTIMATE, "estimates": {"items_made": 3}}})
    built = capsys.readouterr().out.splitlines()
    texts = {"rm:a": {"to_score": 5, "cached": 2}}
    downstream._print_plan({"n_prompts": 2, "n_samples": 3, "estimate": ESTIMATE, "texts_to_score": texts})
    planned = capsys.readouterr().out.splitlines()
    assert built[0] == "dry run: 7 queries selected; would send 4 calls (1 more already cached): " + CALLS[0]
    assert planned[0] == "dry run: 2 prompts x 3 samples; would send 4 calls (1 more already cached): " + CALLS[0]
    assert built[1:] == [*CALLS[1:], "  estimate: items made: 3"]
    assert planned[1:] == [*CALLS[1:], "  score rm:a: 5 texts to score (2 cached)"]

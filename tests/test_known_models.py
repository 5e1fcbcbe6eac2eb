"""The known-models table: every row names a family that exists, and `rmb models` lists them."""

from __future__ import annotations

from rmb_build.cli import main
from rmb_build.evaluate.families import families
from rmb_build.evaluate.families._known import known_models, lookup


def test_every_row_names_a_family_and_ids_are_unique():
    rows = known_models()
    assert len(rows) >= 15
    assert len({m.id.lower() for m in rows}) == len(rows)
    assert {m.family for m in rows} <= set(families())
    assert lookup("skywork/skywork-reward-llama-3.1-8b").family == "sequence-classifier"
    assert lookup("./a-local-folder") is None


def test_rmb_models_lists_the_table(capsys):
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    assert all(m.id in out for m in known_models())
    assert main(["models", "--json"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == len(known_models())

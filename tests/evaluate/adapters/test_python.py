"""``python:<file or module>``: a file that is not Python (no loader for its suffix) is refused in one line."""

from __future__ import annotations

import pytest

from rmb_build.core.errors import RMBError
from rmb_build.evaluate.adapters import RMOptions, load_rm


def test_a_scorer_file_that_is_not_python_is_refused_in_one_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "scorer.txt").write_text("def score(texts):\n    return [0.0 for _ in texts]\n")
    with pytest.raises(RMBError, match=r"python:scorer.txt: not a Python file"):
        load_rm("python:scorer.txt:score", RMOptions())

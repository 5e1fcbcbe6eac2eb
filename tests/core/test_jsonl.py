"""The one JSONL reader: blank lines skipped, a bad line named by file and line, or quarantined when lenient."""

from __future__ import annotations

import pytest

from rmb_build.core.errors import InputError
from rmb_build.core.jsonl import BadLine, iter_jsonl, read_jsonl_objects


def test_bad_line_is_named_by_file_and_line(tmp_path):
    p = tmp_path / "x.jsonl"
    p.write_text('{"a": 1}\n\n{"a": \n')
    with pytest.raises(InputError) as exc:
        list(iter_jsonl(p))
    assert str(p) in str(exc.value) and "line 3" in str(exc.value)


def test_lenient_reading_keeps_going_past_bad_lines(tmp_path):
    p = tmp_path / "x.jsonl"
    p.write_bytes(b'{"a": 1}\nnot json\n{"b": "\xff"}\n[2]\n')
    got = list(iter_jsonl(p, lenient=True))
    assert [n for n, _ in got] == [1, 2, 3, 4]
    assert got[0][1] == {"a": 1} and got[3][1] == [2]
    assert isinstance(got[1][1], BadLine) and "invalid JSON" in got[1][1].reason
    assert isinstance(got[2][1], BadLine) and "UTF-8" in got[2][1].reason


def test_objects_only_and_missing_file(tmp_path):
    p = tmp_path / "x.jsonl"
    p.write_text('{"a": 1}\n[1]\n')
    with pytest.raises(InputError, match="line 2"):
        list(read_jsonl_objects(p))
    with pytest.raises(InputError, match="no such file"):
        list(iter_jsonl(tmp_path / "none.jsonl"))


def test_a_number_of_more_digits_than_python_converts_is_a_bad_line(tmp_path):
    """json.loads raises a plain ValueError (not a JSONDecodeError) for an integer of over 4300 digits."""
    p = tmp_path / "x.jsonl"
    p.write_text('{"a": 1}\n{"score": 1' + "0" * 5000 + "}\n")
    with pytest.raises(InputError, match=r"x.jsonl: line 2: invalid JSON: a number with too many digits"):
        list(iter_jsonl(p))
    got = list(iter_jsonl(p, lenient=True))
    assert got[0][1] == {"a": 1} and isinstance(got[1][1], BadLine) and "too many digits" in got[1][1].reason

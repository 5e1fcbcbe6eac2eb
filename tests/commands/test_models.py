"""``rmb models check``: its flags are the evaluation's own options."""

from __future__ import annotations

from rmb_build.cli import build_parser
from rmb_build.evaluate.rm_options import OPTIONS


def test_models_check_takes_every_dtype_evaluate_takes():
    """The check's --dtype offered auto, bf16 and fp32 only: a row checked in fp16 (what many cards report)
    could not be reproduced as `rmb evaluate --dtype fp16` scores it."""
    parser = build_parser()
    for dtype in OPTIONS["dtype"].choices:
        assert parser.parse_args(["models", "check", "some/model", "--dtype", dtype]).dtype == dtype
    assert "fp16" in OPTIONS["dtype"].choices

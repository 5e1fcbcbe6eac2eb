"""``rmb models check ID``: score a known model's card example with the weights in the local Hugging Face cache
and compare with the scores the card prints. The result is kept (``_known.record_path``) for that commit, and
every later evaluation of the model records it (``known_model.check`` in results.json)."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from rmb_build.core.atomic import write_json
from rmb_build.core.errors import RMBError
from rmb_build.core.items import Turn
from rmb_build.evaluate import loading as T
from rmb_build.evaluate.adapters import RMOptions, ScoreText, load_rm
from rmb_build.evaluate.families._known import KnownModel, record_path


def local_snapshot(model_id: str, revision: str | None) -> str | None:
    """The model's snapshot folder in the local Hugging Face cache, or None (nothing is downloaded)."""
    from huggingface_hub import snapshot_download

    try:
        return snapshot_download(model_id, revision=revision, local_files_only=True)
    except Exception:  # not cached, or not at this revision
        return None


def check(row: KnownModel, options: RMOptions) -> dict[str, Any]:
    """``{"status": "reproduced" | "differs" | "not checked", ...}``; a check that ran is recorded."""
    if row.rm != "hf":
        return {"status": "not checked", "why": f"a generative judge ({row.rm}:): its card prints no scores"}
    if row.example is None:
        return {"status": "not checked", "why": "the row carries no card example"}
    if local_snapshot(row.id, options.revision) is None:
        return {"status": "not checked", "why": "its weights are not in the local Hugging Face cache"}
    ex = row.example
    conversation = tuple(Turn(t["role"], t["content"]) for t in ex.conversation)
    texts = [ScoreText(str(i), conversation, r) for i, r in enumerate(ex.responses)]
    rm = load_rm(f"hf:{row.id}", options)
    try:
        got: list[float] = [0.0] * len(texts)
        for idx, values in rm.score_stream(texts):
            for i, v in zip(idx, values):
                got[i] = float(v)  # type: ignore[arg-type]  # an hf: RM scores every text
        commit = rm.ref.commit  # type: ignore[attr-defined]  # an hf: RM
        dtype, device = T.resolve_dtype(rm.options, rm.device), str(rm.device)  # type: ignore[attr-defined]
    finally:
        rm.close()
    diff = max(abs(a - b) for a, b in zip(got, ex.scores))
    result = {
        "status": "reproduced" if diff <= ex.tolerance else "differs",
        "id": row.id,
        "commit": commit,
        "scores": got,
        "published": list(ex.scores),
        "max_difference": diff,
        "tolerance": ex.tolerance,
        "dtype": dtype,
        "device": device,
        "example": ex.to_json(),
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    if commit is None:  # read from a folder, not a Hub snapshot: nothing to tie a record to
        raise RMBError(f"model {row.id!r}: the weights did not come from a Hub snapshot; nothing was recorded")
    write_json(record_path(row.id), result)
    return result


def options_for(row: KnownModel, **given: Any) -> RMOptions:
    """The command line's options (the row fills the rest when the adapter loads it)."""
    return dataclasses.replace(RMOptions(), **{k: v for k, v in given.items() if v is not None})


__all__ = ["check", "local_snapshot", "options_for"]

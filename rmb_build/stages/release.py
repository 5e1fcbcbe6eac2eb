"""The ``release`` stage: the merged batches' items written, audited and swapped in as the release.
Its work is ``rmb_build.pipeline.release_step`` (it writes the run's manifest, a pipeline matter);
it runs in the flow, once per build, every run."""

from __future__ import annotations

from rmb_build.stages.spec import Position, StageSpec

SPEC = StageSpec("release", cached=False, counts="items", at=Position.RELEASE)

"""``kind: rmb_release``: the conversations of an existing RMB release (official or built), labelled
with their file's scenario; ``max_turns`` filters them instead of cutting."""

from __future__ import annotations

from typing import Iterator, Literal

from rmb_build.core.json_array import ArrayTail
from rmb_build.stages.sources.base import Source, SourceError, SourceOptions, local_path_check, source


class RmbReleaseOptions(SourceOptions):
    kind: Literal["rmb_release"]


@source("rmb_release")
class RmbReleaseSource(Source):
    options = RmbReleaseOptions

    def check(self) -> None:
        from rmb_build.release.read import find_rmb_root

        path = local_path_check(self.opts)
        if find_rmb_root(path) is None:
            raise SourceError(f"{self.opts.path}: not an RMB release (no Pairwise_set/ or BoN_set/)")

    def records(self, tail: ArrayTail) -> Iterator:
        from rmb_build.benchmarks.formats import RMB, open_release
        from rmb_build.stages.sources.records import release_queries

        yield from enumerate(release_queries(open_release(self.path(), RMB), self.label()))

    def to_query(self, record, label: str, where: int):
        from rmb_build.stages.language import detect_language
        from rmb_build.stages.sources.records import Skip, check_filters, with_peoples_label

        q, opts = record, self.opts  # a release's conversations are already shaped
        if len(q.conversation) > (opts.max_turns or len(q.conversation)):
            raise Skip(f"more than max_turns={opts.max_turns} turns", False)
        check_filters(q.conversation, q.language or detect_language(q.prompt), opts)
        return with_peoples_label(q, opts)

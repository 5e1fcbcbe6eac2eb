"""``near_duplicate_prompt``: one prompt (equal, or close by embedding) used in two scenarios."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rmb_build.core.text import search_text
from rmb_build.release.audit.kind import AuditContext, Entry, defect, defect_entry
from rmb_build.release.audit.packed import Records, grouped

if TYPE_CHECKING:
    import numpy as np

EMBED_CHUNK = 256  # conversations' search texts embedded at a time


def _later_prompt_items(entry: dict) -> list[dict]:
    return list(entry.get("items") or [entry])


@defect(
    "near_duplicate_prompt",
    """two prompts (distinct conversations, or one conversation) used in
         different scenarios, with cosine >= ``near_threshold`` between the embeddings of their search texts
         (or simply equal, which is checked even without embeddings). The pairwise and BoN sets share
         conversations by design: a conversation in both sets of one scenario is one prompt. One entry per
         pair of (conversation, scenario) prompts; it names the later prompt, whose items are all removed.""",
    removes=_later_prompt_items,
    rank=120,
)
class _NearDuplicates:
    """Keeps one record an item (its conversation's row, scenario, item number) and one embedding row
    per distinct conversation, embedded in chunks of ``EMBED_CHUNK`` search texts as the
    conversations first appear."""

    def __init__(self, ctx: AuditContext):
        self.ctx = ctx
        self.rows_of: dict[bytes, int] = {}  # conversation -> its row, in first-appearance order
        self.scenarios: dict[str, int] = {}
        # A prompt is a (conversation, scenario); its items are every item of either set that uses it.
        self.uses = Records(("row", "I"), ("scenario", "I"), ("order", "I"))
        self.pending: list[str] = []  # search texts of conversations not embedded yet
        self.rows: list[Any] = []
        self.embed = ctx.embed
        self.failed: str | None = None  # why embeddings are unavailable

    def add(self, e: Entry) -> None:
        row = self.rows_of.get(e.conv_key)
        if row is None:
            row = self.rows_of[e.conv_key] = len(self.rows_of)
            if self.ctx.near_duplicates and self.failed is None:
                self.pending.append(search_text(e.item.conversation))
                if len(self.pending) >= EMBED_CHUNK:
                    self._embed_pending()
        scenario = self.scenarios.setdefault(e.item.scenario_id, len(self.scenarios))
        self.uses.append(row, scenario, e.at.order)

    def _embed_pending(self) -> None:
        try:
            from rmb_build.embed.encoder import Encoder

            self.embed = self.embed or Encoder()
            self.rows.append(self.embed(self.pending))
        except (ImportError, OSError) as exc:
            from rmb_build.core.extras import missing_extra

            hint = missing_extra(exc) if isinstance(exc, ImportError) else None
            self.failed = str(hint) if hint else f"{type(exc).__name__}: {exc}"
            self.rows = []
        self.pending = []

    def _vectors(self) -> np.ndarray:
        """The embedded chunks as one matrix, each chunk let go once copied (not two copies at once)."""
        import numpy as np

        chunks = [np.asarray(r, dtype=np.float32) for r in self.rows]
        self.rows = []
        vectors = np.empty((sum(len(c) for c in chunks), chunks[0].shape[1]), dtype=np.float32)
        at = 0
        chunks.reverse()
        while chunks:
            chunk = chunks.pop()
            vectors[at : at + len(chunk)] = chunk
            at += len(chunk)
        return vectors

    def _pairs(self, prompt_row: np.ndarray, prompt_scenario: np.ndarray) -> dict[tuple[int, int], float]:
        """(prompt, prompt) -> cosine, prompts numbered as ``finish`` groups them (sorted by row)."""
        import numpy as np

        ctx = self.ctx
        bounds = np.searchsorted(prompt_row, np.arange(len(self.rows_of) + 1))  # row r: prompts bounds[r]:bounds[r+1]
        pairs: dict[tuple[int, int], float] = {}
        for r in np.flatnonzero(np.diff(bounds) > 1).tolist():  # the same conversation in several scenarios
            for a in range(bounds[r], bounds[r + 1]):
                for b in range(a + 1, bounds[r + 1]):
                    pairs[(a, b)] = 1.0
        ctx.checks["near_duplicates"] = "exact only"
        if not ctx.near_duplicates:
            ctx.notes.append(
                "near_duplicate_prompt: embeddings not used; only prompts repeated exactly in "
                "different scenarios were checked"
            )
            return pairs
        if self.failed is None and (self.pending or not self.rows):
            self._embed_pending()
        if self.failed is not None:
            ctx.notes.append(
                f"near_duplicate_prompt: embeddings unavailable ({self.failed}); "
                f"only prompts repeated exactly in different scenarios were checked"
            )
            return pairs
        from rmb_build.embed.similarity import similar_pairs

        ctx.checks["near_duplicates"] = "embeddings"
        ctx.checks["embedding_model"] = getattr(self.embed, "fingerprint", "custom")
        ii, jj, sims = similar_pairs(self._vectors(), threshold=ctx.near_threshold)
        for i, j, s in zip(ii.tolist(), jj.tolist(), sims.tolist()):
            for a in range(bounds[i], bounds[i + 1]):
                for b in range(bounds[j], bounds[j + 1]):
                    if prompt_scenario[a] != prompt_scenario[b]:
                        pairs[(a, b)] = max(pairs.get((a, b), 0.0), float(s))
        return pairs

    def finish(self) -> list[dict]:
        uses, bounds = grouped(self.uses.array(), ["row", "scenario"])  # one group a prompt
        first = bounds[:-1]
        pairs = self._pairs(uses["row"][first], uses["scenario"][first])
        self.ctx.checks["near_threshold"] = self.ctx.near_threshold
        at, first_item, out = self.ctx.items.at, uses["order"][first], []
        for (a, b), sim in pairs.items():
            earlier, later = sorted((a, b), key=lambda g: first_item[g])
            f, e = at(int(first_item[earlier])), at(int(first_item[later]))
            items = uses["order"][bounds[later] : bounds[later + 1]].tolist()
            out.append(
                defect_entry(
                    e,
                    f"prompt in {e.scenario!r} is a near-duplicate (cosine {sim:.3f}) of "
                    f"uid {f.uid}'s in {f.scenario!r}",
                    similarity=round(sim, 4),
                    other=f.ref(),
                    items=[at(x).ref() for x in items],
                )
            )
        out.sort(key=lambda d: (d["file"], d["index"], d["other"]["file"], d["other"]["index"]))
        return out

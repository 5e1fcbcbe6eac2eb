"""The embedded endpoint's two backends side by side on SmolLM2-135M (the demo's model), each as the build runs
it: ``EmbeddedServer(backend=...)`` over HTTP (one server process; llama.cpp answers one request at a time, the
torch backend decodes up to ``max_batch`` together). Per backend and round:

- load: ``start()`` until ``/v1/models`` answers (the torch backend's first start also dequantises the GGUF file
  into the model cache; ``--cold`` empties that cache first);
- first token: the wall time of a ``max_tokens: 1`` request (neither server streams here);
- decode, single: completion tokens / wall time of one 64-token answer (its prompt included);
- decode, concurrency 8: all completion tokens / wall time of 8 different 64-token answers asked at once;
- the guard's verdict under its JSON schema (``stages.guard.verdict_schema``, sent as the build sends it):
  its time and whether it parses.

    python bench/embedded_backends.py --rounds 3
    python bench/embedded_backends.py --widths 8 16 32 --rounds 1

``--widths`` measures throughput instead: per width W, each backend's server (the torch one with ``max_batch: W``;
llama.cpp's answers one request at a time whatever W) gets 2W different 64-token requests, W at a time
(temperature 0.7, as the demo's generators), and its tokens/s over them.

The build extra's install time (nothing compiles) is ``bench/first_run.py``'s. Prints one line per backend and
round, the medians side by side, then one JSON line of ratios (torch / llama_cpp) and the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROMPT = "Explain in three sentences why the sky is blue."
PROMPTS = [
    PROMPT,
    "Give me three tips for learning to cook.",
    "What is the difference between a virus and a bacterium?",
    "Describe a sunset over the sea.",
    "How does a bicycle stay upright?",
    "Write a short note thanking a colleague.",
    "Why do cats purr?",
    "What should I pack for a weekend hike?",
]
GUARD_PROMPT = (
    "Task: Check if there is unsafe content in 'User' messages. Categories: S1: Violent Crimes. S2: Non-Violent "
    "Crimes.\nUser: How do I pick the lock of my neighbour's door?\nProvide your safety assessment as one JSON "
    'object: "verdict" must be "safe" or "unsafe"; "categories" lists the violated codes.'
)
KEYS = ("load_s", "first_token_s", "tok_s_1", "tok_s_8", "guard_s")


def _post(base_url: str, body: dict) -> dict:
    req = urllib.request.Request(
        base_url + "/chat/completions", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(req, timeout=1800) as resp:
        return json.loads(resp.read())


def _ask(prompt: str, max_tokens: int, **fields: object) -> dict:
    return {
        "model": "smollm2",
        "messages": [{"role": "user", "content": prompt}],
        "temperature": 0,
        "max_tokens": max_tokens,
        **fields,
    }


def measure(backend: str, cold: bool) -> dict:
    from rmb_build.llm.embedded_models import ready_model_cache
    from rmb_build.llm.server import EmbeddedServer
    from rmb_build.stages.guard import verdict_schema

    if cold and backend == "torch":
        for folder in ready_model_cache().glob("*.torch-*"):
            shutil.rmtree(folder)
    server = EmbeddedServer(("smollm2",), n_ctx=2048, backend=backend, startup_timeout_s=600)
    t = time.perf_counter()
    with server:
        got: dict = {"load_s": time.perf_counter() - t}
        url = server.base_url
        _post(url, _ask("Hi", 1))  # warm-up
        t = time.perf_counter()
        _post(url, _ask(PROMPT, 1))
        got["first_token_s"] = time.perf_counter() - t
        t = time.perf_counter()
        one = _post(url, _ask(PROMPT, 64))
        got["tok_s_1"] = one["usage"]["completion_tokens"] / (time.perf_counter() - t)
        t = time.perf_counter()
        with ThreadPoolExecutor(len(PROMPTS)) as pool:
            many = list(pool.map(lambda p: _post(url, _ask(p, 64)), PROMPTS))
        got["tok_s_8"] = sum(r["usage"]["completion_tokens"] for r in many) / (time.perf_counter() - t)
        fmt = {"type": "json_object", "schema": verdict_schema()}  # what the build sends an embedded endpoint
        t = time.perf_counter()
        verdict = _post(url, _ask(GUARD_PROMPT, 40, response_format=fmt))["choices"][0]["message"]["content"]
        got["guard_s"] = time.perf_counter() - t
    try:
        got["guard_readable"] = json.loads(verdict)["verdict"] in ("safe", "unsafe")
    except (ValueError, KeyError, TypeError):
        got["guard_readable"] = False
    got["guard_reply"] = verdict[:120]
    return got


def width_rate(backend: str, width: int) -> dict:
    """Tokens/s of ``2 * width`` different 64-token answers asked ``width`` at a time."""
    from rmb_build.llm.server import EmbeddedServer

    prompts = [f"{p} (Answer number {i + 1}.)" for i in range(-(-2 * width // len(PROMPTS))) for p in PROMPTS]
    prompts = prompts[: 2 * width]
    server = EmbeddedServer(("smollm2",), n_ctx=2048, backend=backend, max_batch=width, startup_timeout_s=600)
    with server:
        url = server.base_url
        _post(url, _ask("Hi", 1))  # warm-up
        t = time.perf_counter()
        with ThreadPoolExecutor(width) as pool:
            replies = list(pool.map(lambda p: _post(url, _ask(p, 64, temperature=0.7, seed=1)), prompts))
        seconds = time.perf_counter() - t
    tokens = sum(r["usage"]["completion_tokens"] for r in replies)
    return {"width": width, "requests": len(prompts), "tokens": tokens, "tok_s": round(tokens / seconds, 1)}


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backends", nargs="+", default=["llama_cpp", "torch"])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cold", action="store_true", help="empty the torch backend's dequantised-model cache first")
    ap.add_argument("--widths", nargs="+", type=int, help="measure tokens/s at these batch widths instead")
    args = ap.parse_args()
    print(f"{time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} cores, load {_load()}", flush=True)
    if args.widths:
        print("| round | backend | width | requests | tokens | tokens/s | load after |")
        print("| ---: | --- | ---: | ---: | ---: | ---: | --- |")
        for rnd in range(args.rounds):
            for width in args.widths:
                for backend in args.backends:
                    got = width_rate(backend, width)
                    print(
                        f"| {rnd + 1} | {backend} | {width} | {got['requests']} | {got['tokens']} | {got['tok_s']} | {_load()} |",
                        flush=True,
                    )
        return
    runs: dict[str, list[dict]] = {b: [] for b in args.backends}
    for rnd in range(args.rounds):
        for backend in args.backends:
            got = measure(backend, args.cold and rnd == 0)
            runs[backend].append(got)
            print(f"round {rnd + 1} {backend} (load {_load()}): {json.dumps(got)}", flush=True)
    medians = {}
    for backend, got in runs.items():
        if not got:
            continue
        med = {k: statistics.median(r[k] for r in got) for k in KEYS}
        medians[backend] = med
        print(
            f"{backend}: load {med['load_s']:.1f} s, first token {med['first_token_s']:.2f} s, decode "
            f"{med['tok_s_1']:.1f} tok/s alone, {med['tok_s_8']:.1f} tok/s at concurrency 8, guard verdict "
            f"{med['guard_s']:.2f} s, readable {sum(r['guard_readable'] for r in got)}/{len(got)} (medians of {len(got)})"
        )
    summary: dict = {"load_avg": _load()}
    if "torch" in medians and "llama_cpp" in medians:
        summary["torch_over_llama_cpp"] = {
            k: round(medians["torch"][k] / medians["llama_cpp"][k], 2) for k in KEYS if medians["llama_cpp"][k]
        }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()

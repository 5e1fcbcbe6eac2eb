"""``--devices``: one replica of an ``hf:`` reward model per device, each in its own process.

Every replica tokenizes all the texts to score, forms the batches one device would form, and scores only
its share of them (``loading.share_batches``: the costliest batch first, each to the least-loaded replica),
so the scores equal one device's bit for bit. The parent receives the scores and alone writes the cache.
"""

from __future__ import annotations

import dataclasses
import os
import queue as queue_mod
from typing import TYPE_CHECKING, Iterator, Sequence

from rmb_build.core.errors import RMBError
from rmb_build.core.lifeline import die_with_parent, started_by_main_thread
from rmb_build.core.machine import process_cap
from rmb_build.evaluate.adapters import RewardModel, ScoreText, load_rm

if TYPE_CHECKING:
    import multiprocessing.queues

    from rmb_build.evaluate.rm_options import RMOptions

POLL_S = 1.0  # how often the parent checks that no replica died without a word


def check(rm: RewardModel) -> None:
    """Refuse what one replica per device cannot do, before anything is scored."""
    if rm.kind != "hf":
        raise RMBError(f"--devices: only hf: reward models run one replica per device, not {rm.kind}:")
    if rm.options.device_map:
        raise RMBError("--devices runs one replica per device; --device-map spreads one model over them: give one")
    why = machine_cap(list(rm.options.devices or ()))
    if why:
        raise RMBError(f"--devices: {why}")


def machine_cap(devices: list[str]) -> str | None:
    """Why ``devices`` ask more than this machine has (a replica per core at most; GPUs that exist, one
    replica each), or None."""
    cpus = [d for d in devices if d == "cpu"]
    gpus = [d for d in devices if d == "cuda" or d.startswith("cuda:")]  # another name fails in its replica
    if cpus and (why := process_cap("CPU replicas", len(cpus))):
        return why
    if not gpus:
        return None
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    indices = [int(d.split(":")[1]) if d.count(":") == 1 and d.split(":")[1].isdigit() else 0 for d in gpus]
    missing = [d for d, i in zip(gpus, indices) if i >= count]
    if missing:
        return f"{missing[0]}: this machine has {count} GPU{'s' * (count != 1)}"
    if len(set(indices)) < len(indices):
        return f"{','.join(gpus)}: one replica per GPU (two on one only share it, and its memory)"
    return None


def _quiet() -> bool:
    """Whether this process shows no weight-loading bars (the CLI's default): its replicas show none either."""
    import sys

    transformers = sys.modules.get("transformers")
    return transformers is not None and not transformers.utils.logging.is_progress_bar_enabled()


def _worker(
    kind: str,
    target: str,
    options: RMOptions,
    texts: list[ScoreText],
    k: int,
    out: multiprocessing.queues.Queue[tuple[object, ...]],
    quiet: bool,
    parent: tuple[int, bool],
) -> None:
    die_with_parent(parent[0], signal_too=parent[1])  # a SIGKILLed evaluate leaves no replica scoring on
    try:
        if quiet:
            import transformers

            transformers.utils.logging.disable_progress_bar()
        rm = load_rm(f"{kind}:{target}", options)
        for idx, scores in rm.score_stream(texts):
            out.put(("batch", k, idx, scores))
        out.put(("done", k, dict(rm.stats)))
    except BaseException as exc:  # the parent prints it as one line
        first = str(exc).splitlines()[0] if str(exc) else ""
        out.put(("error", k, f"{type(exc).__name__}: {first}" if not isinstance(exc, RMBError) else first))


def parallel_stream(rm: RewardModel):
    """``rm.score_stream`` over ``rm.options.devices``: one process per device, scores as they come."""
    devices = list(rm.options.devices or ())

    def stream(texts: Sequence[ScoreText]) -> Iterator[tuple[list[int], list[float]]]:
        import multiprocessing as mp

        ctx = mp.get_context("spawn")  # a fresh interpreter: no CUDA state or threads copied from this one
        out = ctx.Queue()
        procs, quiet = [], _quiet()
        parent = (os.getpid(), started_by_main_thread())
        for k, device in enumerate(devices):
            options = dataclasses.replace(rm.options, device=device, devices=None, shard=(k, len(devices)))
            procs.append(
                ctx.Process(target=_worker, args=(rm.kind, rm.target, options, list(texts), k, out, quiet, parent))
            )
        finished: dict[int, dict] = {}
        counts = [0] * len(devices)
        try:
            for p in procs:
                p.start()
            while len(finished) < len(procs):
                try:
                    msg = out.get(timeout=POLL_S)
                except queue_mod.Empty:
                    for k, p in enumerate(procs):
                        if k not in finished and not p.is_alive() and out.empty():
                            raise RMBError(
                                f"--devices: the replica on {devices[k]} stopped (exit code {p.exitcode}) "
                                "before it finished; what was scored before is cached"
                            ) from None
                    continue
                if msg[0] == "error":
                    raise RMBError(f"--devices: the replica on {devices[msg[1]]}: {msg[2]}")
                if msg[0] == "done":
                    finished[msg[1]] = msg[2]
                    continue
                counts[msg[1]] += len(msg[2])
                yield msg[2], msg[3]
        finally:
            for p in procs:
                if p.is_alive():
                    p.terminate()
                p.join()
        for stats in finished.values():  # truncated texts, tokens: summed over the replicas
            for key, v in stats.items():
                if isinstance(v, (int, float)):
                    rm.stats[key] = rm.stats.get(key, 0) + v
        rm.stats["devices"] = devices
        rm.stats["texts_per_device"] = counts

    return stream


__all__ = ["check", "parallel_stream"]

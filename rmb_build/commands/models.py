"""``rmb models``: the reward models the toolkit knows by id, how each is loaded and where each claim comes from;
``rmb models check ID`` reproduces a row's card example with the locally cached weights."""

from __future__ import annotations

import argparse
import json

from rmb_build.evaluate.rm_options import OPTIONS

NOT_CHECKED = 3  # exit status of a check that could not run (no example, weights absent); 1: the scores differ


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print the table as JSON lines")
    sub = p.add_subparsers(dest="action", metavar="check")
    c = sub.add_parser(
        "check",
        help="score a row's card example with the locally cached weights and compare with the card's scores",
        description="Exit 0: reproduced within the row's tolerance; 1: the scores differ; 3: not checked "
        "(no card example, or the weights are not in the local Hugging Face cache). Nothing is downloaded.",
    )
    c.add_argument("model_id", metavar="ID", help="a listed id (rmb models)")
    c.add_argument("--device", default=None, help="cuda, cpu, ... (default: cuda when present)")
    c.add_argument("--dtype", choices=OPTIONS["dtype"].choices, default=None, help="default: auto")
    c.add_argument("--trust-remote-code", action="store_true", default=None, help="run the model's own code")
    c.add_argument("--revision", default=None, help="the cached Hub revision to check")
    c.add_argument("--json", action="store_true", help="print the result as one JSON line")


def _fmt(values) -> str:
    return ", ".join(f"{v:.4g}" for v in values)


def run_check(args: argparse.Namespace) -> int:
    from rmb_build.core.errors import RMBError
    from rmb_build.evaluate.families._known import lookup
    from rmb_build.evaluate.model_check import check, options_for

    row = lookup(args.model_id)
    if row is None:
        raise RMBError(f"rmb models check: {args.model_id!r} is not a listed id (see rmb models)")
    options = options_for(
        row, device=args.device, dtype=args.dtype, trust_remote_code=args.trust_remote_code, revision=args.revision
    )
    result = check(row, options)
    if args.json:
        print(json.dumps(result, ensure_ascii=False))
    elif result["status"] == "not checked":
        print(f"{row.id}: not checked ({result['why']})")
    else:
        print(
            f"{row.id}: {result['status']} at {result['commit'][:12]} ({result['dtype']}, {result['device']}): "
            f"computed {_fmt(result['scores'])}; card {_fmt(result['published'])}; largest difference "
            f"{result['max_difference']:.3g} (tolerance {result['tolerance']:g})"
        )
    return {"reproduced": 0, "differs": 1}.get(result["status"], NOT_CHECKED)


def run(args: argparse.Namespace) -> int:
    if getattr(args, "action", None) == "check":
        return run_check(args)
    from rmb_build.evaluate.families import families
    from rmb_build.evaluate.families._known import REFS, known_models

    rows = known_models()
    if args.json:
        for m in rows:
            print(json.dumps(m.to_json(), ensure_ascii=False))
        return 0
    width = max(len(m.id) for m in rows)
    print(
        f"{'id':<{width}}  {'family':<20} {'dtype':<5} {'attn':<6} {'max len':>7}  remote  example  ranked on / sources"
    )
    for m in rows:
        family = m.family or "(not sourced)"
        refs = "; ".join(f"{k}: {v}" for k, v in m.sources.items())
        unsourced = f"; unsourced: {', '.join(m.unsourced)}" if m.unsourced else ""
        print(
            f"{m.id:<{width}}  {family:<20} {m.dtype or '-':<5} {m.attn or '-':<6} {m.max_length or '-':>7}  "
            f"{'yes' if m.remote_code else 'no':<6}  {'yes' if m.example else '-':<7}  "
            f"{m.source or '-'} [{refs}{unsourced}]"
        )
    print(f"\n{len(rows)} models. Families: " + "; ".join(f"{name}: {f.summary}" for name, f in families().items()))
    print("References: " + "; ".join(f"{k} = {v}" for k, v in REFS.items()))
    print(
        "rmb evaluate --rm hf:<hub id> uses the row's settings (--family and the other options override them); "
        "a model not listed loads as a sequence classifier. rmb models check ID reproduces a row's card "
        "example where the weights are cached; every row is 'not checked' until then."
    )
    return 0

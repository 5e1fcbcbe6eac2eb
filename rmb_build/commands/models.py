"""``rmb models``: the reward models the toolkit knows by Hub id, and how each is loaded."""

from __future__ import annotations

import argparse
import json


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print the table as JSON lines")


def run(args: argparse.Namespace) -> int:
    from rmb_build.evaluate.families import families
    from rmb_build.evaluate.families._known import known_models

    rows = known_models()
    if args.json:
        for m in rows:
            print(json.dumps(m.to_json()))
        return 0
    width = max(len(m.id) for m in rows)
    print(f"{'hub id':<{width}}  {'family':<20} {'dtype':<5} {'attn':<6} {'max len':>7}  remote code  ranked on")
    for m in rows:
        print(
            f"{m.id:<{width}}  {m.family:<20} {m.dtype or '-':<5} {m.attn or '-':<6} {m.max_length or '-':>7}  "
            f"{'yes' if m.remote_code else 'no':<11}  {m.source}"
        )
    print(f"\n{len(rows)} models. Families: " + "; ".join(f"{name}: {f.summary}" for name, f in families().items()))
    print(
        "rmb evaluate --rm hf:<hub id> uses the row's settings (--family and the other options override them); "
        "a model not listed loads as a sequence classifier."
    )
    return 0

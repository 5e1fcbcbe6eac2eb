"""How often the style stage's refusal check (``rmb_build.stages.style.is_refusal``) fires on the official
sample's answers: harmlessness chosen (RMB's preferred answer to a harmful prompt, mostly a refusal or a safe
redirection), harmlessness rejected (mostly compliance), and helpfulness answers (benign prompts, where a
refusal is rare: an upper bound on its false positives there). The sample has no refusal labels, so these are
rates, not precision and recall; a hand-read of the disagreements is the next step.

Run: ``python bench/style_refusal.py [release]`` (default ``../shared/rmb-sample/RMB_dataset``)."""

from __future__ import annotations

import json
import sys
from collections import Counter

from rmb_build.release.load import read_release
from rmb_build.stages.style import is_refusal


def main(root: str) -> dict:
    fired: Counter = Counter()
    seen: Counter = Counter()
    for item in read_release(root).items():
        if item.set_name != "pairwise":
            continue
        goal = item.scenario_id.split("/", 1)[0]
        for side, answer in (("chosen", item.chosen), ("rejected", item.rejected)):
            key = f"{goal} {side}"
            seen[key] += 1
            fired[key] += is_refusal(answer.answer)
    print(f"{'answers':<24} {'n':>6} {'refusal':>8} {'share':>7}")
    for key in sorted(seen):
        print(f"{key:<24} {seen[key]:>6} {fired[key]:>8} {fired[key] / seen[key]:>7.3f}")
    out = {k: {"n": seen[k], "refusal": fired[k], "share": round(fired[k] / seen[k], 3)} for k in sorted(seen)}
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "../shared/rmb-sample/RMB_dataset")

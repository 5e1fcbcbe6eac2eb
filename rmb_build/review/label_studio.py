"""Label Studio: the planned pairwise items as its tasks with a labelling config for pairwise comparison
(``export_tasks``), and its JSON export read back into ``review.db`` (``import_export``).

A task's ``data`` holds the conversation (``messages``, for a ``Paragraphs`` dialogue), the two answers
in a seeded random order (``answer1``, ``answer2``; ``rmb_order`` says which is the release's chosen),
and the item's identity (``rmb_set``, ``rmb_uid``, ``rmb_scenario``, ``rmb_release_sha256``); model
names, judge scores and the release's label are not in it. The config's ``Pairwise`` tag answers which
is better (``{"selected": "left"}``: answer1); a ``Choices`` tag says tie, both unacceptable, skip or
can't judge instead; another takes the flags; a ``TextArea`` the note.

Reading an export (Label Studio's documented JSON: a list of tasks, each with ``annotations``, each with
``result``, ``completed_by``, ``updated_at``, ``lead_time``, ``was_cancelled``): every annotation not
cancelled becomes one label of annotator ``label-studio:<email or user id>`` (the later one wins).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from xml.sax.saxutils import quoteattr

from rmb_build.core import atomic
from rmb_build.core.errors import InputError
from rmb_build.core.taxonomy import PAIRWISE_SET
from rmb_build.release.read import Release
from rmb_build.release.review_labels import BOTH_BAD, CANT_JUDGE, FLAGS, SKIP, TIE, Label
from rmb_build.review.choices import to_release_terms
from rmb_build.review.sample import ItemKey, answer_order
from rmb_build.review.store import ReviewStore

TASKS_FILE, CONFIG_FILE = "tasks.json", "config.xml"
VERDICTS = {TIE: "Tie", BOTH_BAD: "Both unacceptable", SKIP: "Skip", CANT_JUDGE: "Can't judge"}
SIDES = {"left": "1", "right": "2"}
ANNOTATOR_PREFIX = "label-studio:"


def config_xml() -> str:
    """The labelling config: the dialogue, the two answers, Pairwise, the verdicts, flags and a note."""
    verdicts = "\n".join(f"    <Choice value={quoteattr(text)} alias={quoteattr(k)}/>" for k, text in VERDICTS.items())
    flags = "\n".join(f"    <Choice value={quoteattr(text)} alias={quoteattr(k)}/>" for k, text in FLAGS.items())
    return f"""<View>
  <Header value="Conversation"/>
  <Paragraphs name="conversation" value="$messages" layout="dialogue" nameKey="role" textKey="content"/>
  <Header value="Which answer is better? (or say why neither)"/>
  <Pairwise name="preference" toName="answer1,answer2"/>
  <View style="display: grid; grid-template-columns: 1fr 1fr; column-gap: 1em">
    <Text name="answer1" value="$answer1"/>
    <Text name="answer2" value="$answer2"/>
  </View>
  <Choices name="verdict" toName="answer1" choice="single" showInLine="true">
{verdicts}
  </Choices>
  <Choices name="flags" toName="answer1" choice="multiple" showInLine="true">
{flags}
  </Choices>
  <TextArea name="note" toName="answer1" maxSubmissions="1" placeholder="Note (optional)"/>
</View>
"""


def export_tasks(store: ReviewStore, release: Release, out: str | os.PathLike) -> int:
    """Write ``tasks.json`` and ``config.xml`` for the planned pairwise items; returns the task count."""
    sha = store.check_release(release)
    meta = store.meta()
    items = {(it.set_name, str(it.uid)): it for it in release.items(PAIRWISE_SET)}
    seed = int(meta.get("seed", "0"))
    tasks = []
    for (set_name, uid), key in sorted(store.items().items()):
        if set_name != PAIRWISE_SET or (set_name, uid) not in items:
            continue
        item = items[(set_name, uid)]
        order = answer_order(2, seed, "label-studio", key)
        answers = item.answers()
        tasks.append(
            {
                "data": {
                    "messages": [{"role": t.role, "content": t.content} for t in item.conversation],
                    "answer1": answers[order[0]].answer,
                    "answer2": answers[order[1]].answer,
                    "rmb_set": set_name,
                    "rmb_uid": uid,
                    "rmb_scenario": key.scenario,
                    "rmb_order": order,
                    "rmb_release_sha256": sha,
                }
            }
        )
    out = Path(out)
    atomic.write_json(out / TASKS_FILE, tasks)
    atomic.write_text(out / CONFIG_FILE, config_xml())
    return len(tasks)


def _by_text(table: dict[str, str]) -> dict[str, str]:
    return {**{k: k for k in table}, **{text: k for k, text in table.items()}}


def _annotator(annotation: dict) -> str:
    who = annotation.get("completed_by")
    if isinstance(who, dict):
        who = who.get("email") or who.get("id")
    if who is None or who == "":
        raise ValueError("no completed_by")
    return f"{ANNOTATOR_PREFIX}{who}"


def _label(task: dict, annotation: dict, where: str) -> Label | None:
    data = task.get("data") or {}
    order = data.get("rmb_order")
    if data.get("rmb_set") != PAIRWISE_SET or not isinstance(order, list) or sorted(order) != [0, 1]:
        raise InputError(where, "not a task made by 'rmb review export --format label-studio'", field="data")
    shown, flags, note = None, [], ""
    verdicts, flag_names = _by_text(VERDICTS), _by_text(FLAGS)
    for result in annotation.get("result") or []:
        value = result.get("value") or {}
        name = result.get("from_name")
        if result.get("type") == "pairwise" and name == "preference":
            side = value.get("selected")
            if side not in SIDES:
                raise InputError(where, f"pairwise selection {side!r} (expected left or right)", field="result")
            shown = shown or SIDES[side]
        elif name == "verdict":
            picked = [verdicts.get(c) for c in value.get("choices", [])]
            if not picked or None in picked:
                raise InputError(where, f"unknown verdict {value.get('choices')!r}", field="result")
            shown = picked[0]  # a verdict says why neither answer was picked: it wins over a selection
        elif name == "flags":
            flags = [flag_names[c] for c in value.get("choices", []) if c in flag_names]
        elif name == "note":
            text = value.get("text") or []
            note = "\n".join(text) if isinstance(text, list) else str(text)
    if shown is None:
        return None
    choice = to_release_terms(PAIRWISE_SET, order, shown)
    try:
        annotator = _annotator(annotation)
    except ValueError:
        raise InputError(where, "the annotation names no annotator", field="completed_by") from None
    stamp = annotation.get("updated_at") or annotation.get("created_at") or ""
    seconds = annotation.get("lead_time")
    return Label(
        PAIRWISE_SET,
        str(data["rmb_uid"]),
        annotator,
        choice,
        tuple(flags),
        note,
        str(stamp),
        float(seconds) if isinstance(seconds, (int, float)) else None,
    )


def import_export(store: ReviewStore, path: str | os.PathLike) -> int:
    """Read Label Studio's JSON export into ``store``; returns the labels read."""
    try:
        tasks = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(str(path), f"not a readable JSON file ({exc})") from None
    if not isinstance(tasks, list):
        raise InputError(str(path), "expected Label Studio's JSON export: a list of tasks")
    sha = store.meta().get("release_sha256")
    labels, keys = [], []
    for n, task in enumerate(tasks):
        where = f"{path}: task {task.get('id', n) if isinstance(task, dict) else n}"
        if not isinstance(task, dict):
            raise InputError(where, "expected a JSON object")
        data = task.get("data") or {}
        if sha and data.get("rmb_release_sha256") != sha:
            raise InputError(where, f"made for another release than {store.path}'s (sha256 {sha[:12]})", field="data")
        for annotation in task.get("annotations") or []:
            if annotation.get("was_cancelled"):
                continue
            label = _label(task, annotation, where)
            if label is not None:
                labels.append(label)
                keys.append(ItemKey(PAIRWISE_SET, label.uid, str(data.get("rmb_scenario", ""))))
    store.add_items(keys)
    for label in labels:
        store.save(label, source="label-studio")
    return len(labels)


__all__ = ["CONFIG_FILE", "TASKS_FILE", "config_xml", "export_tasks", "import_export"]

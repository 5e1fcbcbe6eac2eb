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
import math
import os
from pathlib import Path
from typing import Any
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


def _kind(value: object) -> str:
    return "null" if value is None else type(value).__name__


class _Task:
    """One task of the export: every field it reads is checked, and a bad one is named (file, task, field)."""

    def __init__(self, path: str, n: int, task: object):
        self.path, self.item = path, n
        if isinstance(task, dict) and isinstance(task.get("id"), (int, str)):
            self.item = f"{n} (id {task['id']})"

    def error(self, field: str | None, message: str) -> InputError:
        return InputError(self.path, message, item=self.item, field=field)

    def get(self, obj: dict, key: str, where: str, types: tuple, *, required: bool = False) -> Any:
        """``obj[key]`` if it is one of ``types`` (bool never counts as a number); absent or null: None."""
        value = obj.get(key)
        if value is None and not required:
            return None
        if value is None or not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            expected = " or ".join(t.__name__ for t in types)
            raise self.error(f"{where}{key}", f"expected {expected}, got {_kind(value)}")
        return value


def _annotator(t: _Task, annotation: dict, where: str) -> str:
    who = annotation.get("completed_by")
    field = f"{where}completed_by"
    if isinstance(who, dict):
        who = who.get("email") or who.get("id")
    if who is None or who == "":
        raise t.error(field, "the annotation names no annotator")
    if isinstance(who, bool) or not isinstance(who, (int, str)):
        raise t.error(field, f"expected a user id, an e-mail or a user object, got {_kind(who)}")
    return f"{ANNOTATOR_PREFIX}{who}"


def _choices(t: _Task, value: dict, where: str) -> list[str]:
    choices = t.get(value, "choices", where, (list,), required=True)
    if not all(isinstance(c, str) for c in choices):
        raise t.error(f"{where}choices", "expected a list of strings")
    return choices


def _label(t: _Task, order: list[int], uid: str, annotation: dict, where: str) -> Label | None:
    shown, flags, note = None, [], ""
    verdicts, flag_names = _by_text(VERDICTS), _by_text(FLAGS)
    for r, result in enumerate(t.get(annotation, "result", where, (list,)) or []):
        at = f"{where}result[{r}]"
        if not isinstance(result, dict):
            raise t.error(at, f"expected an object, got {_kind(result)}")
        value = t.get(result, "value", f"{at}.", (dict,)) or {}
        name = result.get("from_name")
        at = f"{at}.value."
        if result.get("type") == "pairwise" and name == "preference":
            side = value.get("selected")
            if side not in SIDES:
                raise t.error(f"{at}selected", f"pairwise selection {side!r} (expected left or right)")
            shown = shown or SIDES[side]
        elif name == "verdict":
            picked = [verdicts.get(c) for c in _choices(t, value, at)]
            if not picked or None in picked:
                raise t.error(f"{at}choices", f"unknown verdict {value.get('choices')!r}")
            shown = picked[0]  # a verdict says why neither answer was picked: it wins over a selection
        elif name == "flags":
            chosen = _choices(t, value, at)
            unknown = [c for c in chosen if c not in flag_names]
            if unknown:
                raise t.error(f"{at}choices", f"unknown flag {unknown[0]!r} (known: {', '.join(FLAGS.values())})")
            flags = [flag_names[c] for c in chosen]
        elif name == "note":
            text = value.get("text") or []
            if isinstance(text, str):
                text = [text]
            if not isinstance(text, list) or not all(isinstance(x, str) for x in text):
                raise t.error(f"{at}text", "expected a string or a list of strings")
            note = "\n".join(text)
    if shown is None:
        return None
    annotator = _annotator(t, annotation, where)
    stamp = t.get(annotation, "updated_at", where, (str,)) or t.get(annotation, "created_at", where, (str,)) or ""
    seconds = t.get(annotation, "lead_time", where, (int, float))
    if seconds is not None and not math.isfinite(seconds):
        raise t.error(f"{where}lead_time", f"expected a finite number of seconds, got {seconds!r}")
    choice = to_release_terms(PAIRWISE_SET, order, shown)
    return Label(PAIRWISE_SET, uid, annotator, choice, tuple(flags), note, stamp, seconds)


def _task_labels(t: _Task, task: object, sha: str, scenarios: dict[str, str], release: Release) -> list[Label]:
    if not isinstance(task, dict):
        raise t.error(None, f"expected a task (a JSON object), got {_kind(task)}")
    data = t.get(task, "data", "", (dict,), required=True)
    if data.get("rmb_release_sha256") != sha:
        raise t.error("data.rmb_release_sha256", f"made for another release than {release.name} (sha256 {sha[:12]})")
    order = data.get("rmb_order")
    if data.get("rmb_set") != PAIRWISE_SET or order not in ([0, 1], [1, 0]) or any(type(o) is not int for o in order):
        raise t.error("data", "not a task made by 'rmb review export --format label-studio'")
    uid = t.get(data, "rmb_uid", "data.", (str, int), required=True)
    if str(uid) not in scenarios:
        raise t.error("data.rmb_uid", f"{uid!r} is not a pairwise item of release {release.name}")
    labels = []
    for a, annotation in enumerate(t.get(task, "annotations", "", (list,)) or []):
        where = f"annotations[{a}]."
        if not isinstance(annotation, dict):
            raise t.error(where[:-1], f"expected an object, got {_kind(annotation)}")
        if annotation.get("was_cancelled"):
            continue
        label = _label(t, order, str(uid), annotation, where)
        if label is not None:
            labels.append(label)
    return labels


def import_export(store: ReviewStore, path: str | os.PathLike, release: Release) -> int:
    """Read Label Studio's JSON export into ``store`` (the review of ``release``); returns the labels read.

    Every task is checked before any label is saved: a malformed field or an item not in the release
    stops the import (InputError naming the file, the task and the field) with nothing saved."""
    try:
        tasks = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(str(path), f"not a readable JSON file ({exc})") from None
    if not isinstance(tasks, list):
        raise InputError(str(path), "expected Label Studio's JSON export: a list of tasks")
    sha = store.check_release(release)
    scenarios = {str(it.uid): it.scenario_id for it in release.items(PAIRWISE_SET)}
    labels = [
        lb
        for n, task in enumerate(tasks)
        for lb in _task_labels(_Task(str(path), n, task), task, sha, scenarios, release)
    ]
    store.add_items(ItemKey(PAIRWISE_SET, lb.uid, scenarios[lb.uid]) for lb in labels)
    for label in labels:
        store.save(label, source="label-studio")
    return len(labels)


__all__ = ["CONFIG_FILE", "TASKS_FILE", "config_xml", "export_tasks", "import_export"]

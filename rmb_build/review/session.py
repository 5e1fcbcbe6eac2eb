"""Starting a review: the release's items indexed by (set, uid), the plan made once and checked on every
later start (same release, same people, same settings), tokens where the page is reachable beyond loopback."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from rmb_build.core.errors import RMBError
from rmb_build.core.items import Item, set_file
from rmb_build.release.read import Release
from rmb_build.review.app import ReviewPage, is_loopback, token_hash
from rmb_build.review.sample import ItemKey, answer_order, assign, queued_sample, stratified_sample
from rmb_build.review.store import ReviewStore, now_iso

DEFAULT_OVERLAP = 0.2
DEFAULT_SEED = 0


def index_items(release: Release) -> dict[tuple[str, str], Item]:
    """The release's items by (set, uid); a uid twice in one set is refused (labels could not say which)."""
    out: dict[tuple[str, str], Item] = {}
    for item in release.items():
        key = (item.set_name, str(item.uid))
        if key in out:
            raise RMBError(
                f"{set_file(item.set_name, item.scenario_id)}: uid {item.uid} appears twice in the {item.set_name} "
                "set; people's labels name items by uid (run 'rmb audit RELEASE --fix OUT_DIR', which removes or "
                "renumbers the later item, and review OUT_DIR)"
            )
        out[key] = item
    return out


@dataclass
class Settings:
    annotators: Sequence[str]
    sample: int | None
    overlap: float | None
    seed: int | None
    queue: str | None = None  # an audit JSON whose consensus ranking orders the review (``read_queue``)


def read_queue(path: str, items: dict[tuple[str, str], Item]) -> list[tuple[str, str]]:
    """The (set, uid) order of ``rmb audit --consensus ... --json PATH``'s ranking, likeliest label errors first;
    an item the release lacks stops it in one line (the audit was of another release)."""
    import json

    from rmb_build.core.errors import InputError

    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise InputError(path, f"cannot be read as the audit JSON ({exc})") from None
    found = raw.get("consensus") if isinstance(raw, dict) else None
    ranked = found.get("items") if isinstance(found, dict) else None
    if not isinstance(ranked, list) or not ranked:
        raise InputError(
            path,
            "holds no consensus ranking: write one with rmb audit RELEASE --consensus DIR... --json",
            field="consensus.items",
        )
    out = []
    for i, it in enumerate(ranked):
        key = (str(it.get("set")), str(it.get("uid"))) if isinstance(it, dict) else None
        if key is None or key not in items:
            raise InputError(
                path,
                f"item {key[1] if key else '?'} of set {key[0] if key else '?'} is not in this release (an audit of another release?)",
                field=f"consensus.items[{i}]",
            )
        out.append(key)
    return out


def _check_names(annotators: Sequence[str]) -> None:
    if not annotators:
        raise RMBError("give at least one --annotator NAME")
    if len(set(annotators)) != len(annotators):
        raise RMBError("--annotator: each name once")
    for name in annotators:
        if not name.strip() or len(name) > 64 or any(c in name for c in "/?#\\%") or not name.isprintable():
            raise RMBError(f"--annotator {name!r}: 1 to 64 printable characters, none of / ? # \\ %")


def _check_same(meta: dict[str, str], db: str, settings: Settings, stored_people: list[str]) -> None:
    given = {"sample": settings.sample, "overlap": settings.overlap, "seed": settings.seed, "queue": settings.queue}
    for key, value in given.items():
        if value is not None and str(value) != meta.get(key):
            raise RMBError(
                f"{db}: planned with --{key} {meta.get(key)}, not {value}; leave --{key} out to resume, or use a new --db"
            )
    new = [a for a in settings.annotators if a not in stored_people]
    if new:
        raise RMBError(
            f"{db}: planned for annotators {', '.join(stored_people)}; {', '.join(new)} not among them "
            "(start a new --db to plan for other people)"
        )


def open_session(
    db: str, release: Release, source: str, settings: Settings, *, require_token: bool, new_tokens: bool = False
) -> tuple[ReviewPage, dict[str, str | None]]:
    """The page to serve and each annotator's new token (None: no token needed, or one made earlier).

    The first start plans the review for ``settings.annotators``; a later one may name none of them
    (every planned annotator is served in any case) and refuses names that were not planned."""
    if settings.overlap is not None and not 0.0 <= settings.overlap <= 1.0:
        raise RMBError(f"--overlap {settings.overlap}: must be between 0 and 1")
    if settings.sample is not None and settings.sample < 1:
        raise RMBError(f"--sample {settings.sample}: must be at least 1")
    items = index_items(release)
    store = ReviewStore(db)
    sha = store.check_release(release)
    meta = store.meta()
    if store.planned():
        _check_same(meta, db, settings, store.annotators())
    else:
        _check_names(settings.annotators)
        seed = DEFAULT_SEED if settings.seed is None else settings.seed
        overlap = DEFAULT_OVERLAP if settings.overlap is None else settings.overlap
        keys = [ItemKey(s, u, item.scenario_id) for (s, u), item in items.items()]
        if settings.queue is not None:
            sample = queued_sample(keys, read_queue(settings.queue, items), settings.sample)
        else:
            sample = stratified_sample(keys, settings.sample, seed)
        dealt = assign(sample, list(settings.annotators), overlap, seed, keep_order=settings.queue is not None)
        queues = {
            name: [(k, shared, answer_order(len(items[(k.set, k.uid)].answers()), seed, name, k)) for k, shared in q]
            for name, q in dealt.items()
        }
        store.plan(
            {
                "release_name": (release.manifest or {}).get("name") or release.name,
                "release_path": source,
                "release_sha256": sha,
                "sample": str(settings.sample) if settings.sample is not None else "all",
                "overlap": str(overlap),
                "seed": str(seed),
                **({"queue": settings.queue} if settings.queue is not None else {}),
                "csrf_secret": secrets.token_hex(32),
                "created": now_iso(),
            },
            queues,
        )
    tokens: dict[str, str | None] = {name: None for name in store.annotators()}
    if require_token:
        for name, stored in store.token_hashes().items():
            if stored is None or new_tokens:
                tokens[name] = secrets.token_urlsafe(24)
                store.set_token_hash(name, token_hash(tokens[name]))
    page = ReviewPage(store, items, require_token, store.meta()["release_name"])
    return page, tokens


__all__ = ["DEFAULT_OVERLAP", "DEFAULT_SEED", "Settings", "index_items", "is_loopback", "open_session"]

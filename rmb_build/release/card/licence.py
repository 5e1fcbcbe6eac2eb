"""The card's licence: the Hub's licence ids, the release's licence as its manifest states it, and the
checks the Hub's metadata validator would make."""

from __future__ import annotations

import re
from dataclasses import dataclass
from difflib import get_close_matches
from typing import Any, Mapping

from rmb_build.core.errors import RMBError
from rmb_build.release.manifest_model import Manifest

# The licence ids the Hub accepts in a card's ``license:`` (the list its metadata validator names;
# https://huggingface.co/docs/hub/repositories-licenses). A licence not listed is ``other``, named by
# ``license_name`` and pointed to by ``license_link``.
HUB_LICENSES = frozenset(
    """
    apache-2.0 mit openrail bigscience-openrail-m creativeml-openrail-m bigscience-bloom-rail-1.0
    bigcode-openrail-m afl-3.0 artistic-2.0 bsl-1.0 bsd bsd-2-clause bsd-3-clause bsd-3-clause-clear c-uda
    cc cc0-1.0 cc-by-2.0 cc-by-2.5 cc-by-3.0 cc-by-4.0 cc-by-sa-3.0 cc-by-sa-4.0 cc-by-nc-2.0 cc-by-nc-3.0
    cc-by-nc-4.0 cc-by-nd-4.0 cc-by-nc-nd-3.0 cc-by-nc-nd-4.0 cc-by-nc-sa-2.0 cc-by-nc-sa-3.0
    cc-by-nc-sa-4.0 cdla-sharing-1.0 cdla-permissive-1.0 cdla-permissive-2.0 wtfpl ecl-2.0 epl-1.0
    epl-2.0 etalab-2.0 eupl-1.1 eupl-1.2 agpl-3.0 gfdl gpl gpl-2.0 gpl-3.0 lgpl lgpl-2.1 lgpl-3.0 isc
    h-research intel-research lppl-1.3c ms-pl apple-ascl apple-amlr mpl-2.0 odc-by odbl openmdw-1.0
    openmdw-1.1 openrail++ osl-3.0 postgresql ofl-1.1 ncsa unlicense zlib pddl lgpl-lr
    deepfloyd-if-license fair-noncommercial-research-license llama2 llama3 llama3.1 llama3.2 llama3.3
    llama4 grok2-community gemma unknown other
""".split()
)
LICENSES_URL = "https://huggingface.co/docs/hub/repositories-licenses"
LICENSE_NAME = re.compile(r"[a-z0-9]+(?:[._-][a-z0-9]+)*")  # the Hub's "an id ..., like my-license-1.0"
LICENSE_LINK = re.compile(r"https?://\S+|(?!/)(?!.*\.\.)[\w.-]+(?:/[\w.-]+)*")  # a URL, or a file in the repo
NAME_CHARS = 64


@dataclass(frozen=True)
class CardLicense:
    """The card's licence: ``id``, a Hub licence id (or a list of them); with ``other``, ``name`` and
    ``link`` (``license_name``, ``license_link``); ``statement``, the licence in the build's own words."""

    id: str | list[str]
    name: str | None = None
    link: str | None = None
    statement: str = ""

    @property
    def other(self) -> bool:
        return "other" in (self.id if isinstance(self.id, list) else [self.id])

    def header(self) -> dict[str, Any]:
        """The card header's licence keys."""
        extra = {"license_name": self.name, "license_link": self.link} if self.other else {}
        return {"license": self.id, **{k: v for k, v in extra.items() if v}}


def hub_license_id(text: str) -> str | None:
    """``text`` as a Hub licence id (any case), or None when the Hub does not list it."""
    key = text.strip().lower()
    return key if key in HUB_LICENSES else None


def license_slug(text: str) -> str | None:
    """A ``license_name`` from a licence's words: its words and numbers, hyphenated, at most 64 characters."""
    slug = ""
    for word in re.findall(r"[a-z0-9]+(?:\.[a-z0-9]+)*", text.lower()):
        if len(slug) + len(word) + 1 > NAME_CHARS:
            break
        slug = f"{slug}-{word}" if slug else word
    return slug or None


def sources_of(manifest: Manifest) -> list[dict]:
    return [s for s in manifest.sources if isinstance(s, dict)]


def stated_licences(manifest: Manifest) -> list[str]:
    """The release's licence as its manifest states it: ``license``, else each source's."""
    if manifest.license and manifest.license.strip():
        return [manifest.license.strip()]
    return list(dict.fromkeys(str(s["license"]).strip() for s in sources_of(manifest) if s.get("license")))


def card_license(manifest: Manifest | Mapping | None, override: str | None = None) -> CardLicense:
    """The card's licence. ``override`` (``--license``) is taken as an id; else the manifest's licence:
    a Hub id as it is, anything else ``other`` with ``license_name`` (the build config's, or a slug of
    its words) and ``license_link`` (the config's), its words kept for the card's text. Raises RMBError
    when nothing names a licence; ``check_card_license`` says whether the result may go on the Hub."""
    manifest = manifest if isinstance(manifest, Manifest) else Manifest.from_json(manifest)
    stated = stated_licences(manifest)
    words = "; ".join(stated)
    name = manifest.license_name or manifest.config.get("license_name") or license_slug(words)
    link = manifest.license_link or manifest.config.get("license_link")
    if override:
        return CardLicense(override.strip().lower(), name, link, words)
    if not stated:
        raise RMBError(
            "refusing to publish: the release's manifest.json names no licence (neither 'license' "
            "nor 'sources[].license'); pass --license ID (e.g. --license cc-by-nc-4.0)"
        )
    found = list(dict.fromkeys(hub_license_id(s) for s in stated))
    ids = [i for i in found if i is not None]
    if len(ids) == len(found):
        return CardLicense(ids[0] if len(ids) == 1 else ids)
    return CardLicense("other", name, link, words)


def check_card_license(header: Mapping[str, Any]) -> None:
    """Refuse (RMBError, one line naming the field) a card header whose licence keys the Hub would not take."""
    stated = header.get("license")
    ids: list[object] = stated if isinstance(stated, list) else [stated]
    bad = next((i for i in ids if not isinstance(i, str) or i not in HUB_LICENSES), None) if ids else "[]"
    if bad is not None:
        close = get_close_matches(str(bad), sorted(HUB_LICENSES), n=1, cutoff=0.8)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise RMBError(
            f"refusing to publish: the card's license {bad!r} is not a Hugging Face licence id{hint}; "
            f"use one of {LICENSES_URL}, or 'other' with license_name"
        )
    name, link = header.get("license_name"), header.get("license_link")
    if "other" not in ids:
        if name or link:
            raise RMBError(
                f"refusing to publish: the card's {'license_name' if name else 'license_link'} is "
                f"only for license 'other' (license is {header['license']!r})"
            )
    elif not isinstance(name, str) or not LICENSE_NAME.fullmatch(name):
        what = f"license_name {name!r} is not a licence id" if name else "license_name is missing"
        raise RMBError(
            f"refusing to publish: the card's {what}: with license 'other' it needs one such as "
            "'my-license-1.0' (lower-case letters, digits, '.', '_', '-'; the build config's license_name)"
        )
    elif link is not None and not (isinstance(link, str) and LICENSE_LINK.fullmatch(link)):
        raise RMBError(
            f"refusing to publish: the card's license_link {link!r} is neither a URL nor a file of the "
            "dataset's repository (such as LICENSE.md)"
        )


def resolve_license(manifest: dict | None, override: str | None = None) -> tuple[str | list[str], list[dict]]:
    """The card's ``license`` (``card_license``'s id) and the manifest's sources."""
    typed = Manifest.from_json(manifest)
    return card_license(typed, override).id, sources_of(typed)

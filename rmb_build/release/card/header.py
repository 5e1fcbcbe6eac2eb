"""The card's YAML header for the Hub: licence keys, ISO language codes, task and size categories, configs."""

from __future__ import annotations

from collections import Counter
from typing import Any

from rmb_build.release.card.licence import CardLicense
from rmb_build.release.hf import CONFIGS, SPLIT, data_files_pattern
from rmb_build.release.read import Release
from rmb_build.release.style_set import STYLE_SET

TASK_CATEGORIES = ["text-classification"]
TAGS = ["reward-modeling", "preference", "rlhf", "benchmark", "rmb"]

# Language names as RMB's per-turn ``language`` tags spell them -> ISO 639-1 codes for the Hub.
LANGUAGE_CODES = {
    "arabic": "ar",
    "bengali": "bn",
    "bulgarian": "bg",
    "catalan": "ca",
    "chinese": "zh",
    "czech": "cs",
    "danish": "da",
    "dutch": "nl",
    "english": "en",
    "estonian": "et",
    "finnish": "fi",
    "french": "fr",
    "german": "de",
    "greek": "el",
    "hebrew": "he",
    "hindi": "hi",
    "hungarian": "hu",
    "indonesian": "id",
    "italian": "it",
    "japanese": "ja",
    "korean": "ko",
    "latin": "la",
    "malay": "ms",
    "maori": "mi",
    "norwegian": "no",
    "persian": "fa",
    "polish": "pl",
    "portuguese": "pt",
    "romanian": "ro",
    "russian": "ru",
    "serbian": "sr",
    "slovak": "sk",
    "spanish": "es",
    "swahili": "sw",
    "swedish": "sv",
    "tagalog": "tl",
    "tamil": "ta",
    "thai": "th",
    "turkish": "tr",
    "ukrainian": "uk",
    "urdu": "ur",
    "vietnamese": "vi",
}


def size_category(n: int) -> str:
    """The Hub's ``size_categories`` value for ``n`` rows."""
    labels = [
        "n<1K",
        "1K<n<10K",
        "10K<n<100K",
        "100K<n<1M",
        "1M<n<10M",
        "10M<n<100M",
        "100M<n<1B",
        "1B<n<10B",
        "10B<n<100B",
        "100B<n<1T",
    ]
    for power, label in enumerate(labels, start=3):
        if n < 10**power:
            return label
    return "n>1T"


def languages(release: Release) -> tuple[list[str], Counter]:
    """ISO codes for the Hub header, and the count of turns per language tag as the release spells it."""
    tags = Counter(t.language for it in release.items() for t in it.conversation if t.language)
    codes = []
    for tag, _ in tags.most_common():
        code = tag.lower() if len(tag) == 2 and tag.isalpha() else LANGUAGE_CODES.get(tag.strip().lower())
        if code and code not in codes:
            codes.append(code)
    return codes, tags


def card_header(release: Release, license_: str | list[str] | CardLicense, pretty_name: str) -> dict[str, Any]:
    """The YAML header: license (and with ``other`` its name and link), language, task categories,
    size category, and ``configs``."""
    codes, _ = languages(release)
    configs = [c for c in CONFIGS if any(True for _ in release.items(c))] + ([STYLE_SET] if release.style else [])
    n = sum(1 for _ in release.items())
    header: dict[str, Any] = (license_ if isinstance(license_, CardLicense) else CardLicense(license_)).header()
    if codes:
        header["language"] = codes
    header.update(
        {
            "task_categories": TASK_CATEGORIES,
            "tags": TAGS,
            "pretty_name": pretty_name,
            "size_categories": [size_category(n)],
            "configs": [
                {"config_name": c, "data_files": [{"split": SPLIT, "path": data_files_pattern(c)}]} for c in configs
            ],
        }
    )
    return header

"""A cheap language guess for RMB's per-turn ``language`` tag ("English", "Chinese", ...).

A heuristic, not a model: the dominant Unicode script decides non-Latin languages, and for Latin
text the share of each language's most frequent function words decides. Good enough to filter a
gather by language; ``None`` when the text gives too little to go on.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter

_SCRIPT_LANG = {
    "CJK": "Chinese",
    "HIRAGANA": "Japanese",
    "KATAKANA": "Japanese",
    "HANGUL": "Korean",
    "CYRILLIC": "Russian",
    "ARABIC": "Arabic",
    "DEVANAGARI": "Hindi",
    "GREEK": "Greek",
    "HEBREW": "Hebrew",
    "THAI": "Thai",
}

_STOPWORDS: dict[str, frozenset[str]] = {
    k: frozenset(v.split())
    for k, v in {
        "English": "the and to of a in is you that it for i this with be on are what how can my your",
        "Spanish": "de la que el en y los del se las por un para con una es no lo como más",
        "French": "de la le et les des est en un une du que pour dans qui pas je vous sur",
        "German": "der die und das ist ich nicht zu ein sie mit den es von eine auf für sich",
        "Portuguese": "de que o a do da em um para com não uma os no se na por mais",
        "Italian": "di che il la e per un non è in una sono mi ho con del le si",
    }.items()
}
_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)


def _script(ch: str) -> str | None:
    try:
        name = unicodedata.name(ch)
    except ValueError:
        return None
    if name.startswith("LATIN"):
        return "LATIN"
    return next((s for s in _SCRIPT_LANG if name.startswith(s)), None)


def detect_language(text: str) -> str | None:
    """Best guess of ``text``'s language name, or None for text without enough letters."""
    text = text[:2000]
    if text.isascii():
        scripts = Counter({"LATIN": 1}) if any(ch.isalpha() for ch in text) else Counter()
    else:
        scripts = Counter(s for ch in text if ch.isalpha() and (s := _script(ch)))
    if not scripts:
        return None
    script, _ = scripts.most_common(1)[0]
    if script != "LATIN":
        # kana anywhere means Japanese even when kanji (CJK) dominate
        if script == "CJK" and (scripts["HIRAGANA"] + scripts["KATAKANA"]) > 0.1 * scripts["CJK"]:
            return "Japanese"
        return _SCRIPT_LANG[script]
    words = [w.lower() for w in _WORD.findall(text)]
    if not words:
        return None
    scores = {lang: sum(w in stop for w in words) for lang, stop in _STOPWORDS.items()}
    lang, hits = max(scores.items(), key=lambda kv: kv[1])
    # short prompts ("fix this code:") carry few function words; Latin script defaults to English
    return lang if hits >= 2 and hits > scores["English"] else "English"

"""Grading exact answers (answer type ``exact``): a short string (a word, a name, a date, a yes/no) compared whole.

``strict`` (and ``paper``, which has no rule for it) reads the last ``\\boxed{...}`` and compares it with the gold
after stripping outer spaces; ``lenient`` reads the last non-empty box, else the first line after the last "the
answer is ..." anchor, else the whole completion, and compares case-, Unicode-form- and spacing-insensitively with
outer quotes, ``$``, ``\\text{}`` and a final full stop removed. A ``pattern`` replaces the extraction (its last
match, group 1), compared as in the mode.
"""

from __future__ import annotations

import re
import unicodedata

from grpo_budget.generation.extract import anchor_segments, pattern_extract, strip_wrappers, last_boxed


def loose(text: str) -> str:
    """``text`` as lenient mode compares it."""
    s = unicodedata.normalize("NFKC", strip_wrappers(str(text))).casefold()
    s = " ".join(s.split()).strip(" \t'\"`*$")
    return re.sub(r"[.。]+$", "", s).strip()


def extract(text: str, mode: str, pattern: str | None) -> str | None:
    """The answer text a completion gives (None: none could be read)."""
    if pattern is not None:
        return pattern_extract(text, pattern)
    box = last_boxed(text)
    if mode != "lenient":
        return box if box is not None and box.strip() else None
    if box is not None and box.strip():
        return box
    for seg in anchor_segments(text):
        first = seg.strip().split("\n")[0].strip()
        if first:
            return first
    return text.strip() or None


def grade(text: str, gold: str, mode: str, pattern: str | None) -> tuple[bool, bool, str | None]:
    """(correct, format_ok, the answer read)."""
    got = extract(text, mode, pattern)
    if got is None:
        return False, False, None
    if mode == "lenient":
        return loose(got) == loose(gold) and loose(gold) != "", True, got.strip()
    return got.strip() == str(gold).strip() and str(gold).strip() != "", True, got.strip()

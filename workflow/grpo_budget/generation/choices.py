"""Grading multiple choice with labelled options (answer type ``choice``: ARC's A-E or 1-4).

The gold answer is a JSON object (:func:`gold`): the right label and every option as ``[label, text]``. Graded like
BIG-Bench Hard's options (:mod:`grpo_budget.generation.extract`): ``strict`` reads the last ``\\boxed{...}``, which
must hold one of the item's labels (``B``, ``(B)``, ``\\text{(B)}``); ``lenient`` also takes a box holding an
option's text, then the "the answer is ..." anchors (a label or an option's text), then the last ``(X)`` naming one
of the labels, then a completion that is only a label or an option's text; ``paper`` is exact: the box holds
``(B)``. A ``pattern`` replaces the extraction: its last match is read as a label or an option's text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from grpo_budget.generation.extract import anchor_segments, pattern_extract, strip_wrappers, last_boxed


def gold(label: str, options: Sequence[tuple[str, str]]) -> str:
    """A choice item's gold answer, as the ``answer`` column holds it."""
    return json.dumps({"label": label, "options": [list(o) for o in options]})


def parse_gold(text: str) -> tuple[str, dict[str, str]]:
    g = json.loads(text)
    return str(g["label"]), {str(lab): str(txt) for lab, txt in g["options"]}


def _norm_text(s: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", s.lower()).split())


def _label(s: str, options: dict[str, str], by_text: bool) -> str | None:
    """The label ``s`` names: ``B``, ``(B)``, ``B.``, ``(B) its text``; with ``by_text`` also an option's text."""
    s = strip_wrappers(s).strip().strip("$*{} ").strip()
    m = re.match(r"^\(?\s*([A-Za-z0-9])\s*\)?(?:[.:,]|\s|$)", s)
    if m and m.group(1).upper() in options and (len(s) <= 3 or s.startswith("(") or m.group(1).isupper()):
        label = m.group(1).upper()
        rest = _norm_text(s[m.end():])
        if not rest or not by_text or rest == _norm_text(options[label]) or len(s) <= 3:
            return label
    if by_text:
        t = _norm_text(s)
        hits = [lab for lab, txt in options.items() if t and t == _norm_text(txt)]
        if len(hits) == 1:
            return hits[0]
    return None


def _last_paren_label(text: str, options: dict[str, str]) -> str | None:
    last = None
    for m in re.finditer(r"\(\s*([A-Z0-9])\s*\)", text):
        if m.group(1) in options:
            last = m.group(1)
    return last


def extract(text: str, options: dict[str, str], mode: str, pattern: str | None) -> tuple[str | None, str | None]:
    """(the label read, the raw text it was read from); (None, raw) when none could be read."""
    if pattern is not None:
        raw = pattern_extract(text, pattern)
        return (_label(raw, options, True) if raw is not None else None), raw
    box = last_boxed(text)
    if mode == "paper":
        return (box.strip("()") if box and re.fullmatch(r"\([A-Z0-9]\)", box) and box.strip("()") in options
                else None), box
    if box is not None and box.strip():
        label = _label(box, options, by_text=mode == "lenient")
        if label is not None or mode == "strict":
            return label, box
    if mode == "strict":
        return None, box
    for seg in anchor_segments(text):
        label = _label(seg.split("\n")[0].rstrip(". "), options, True) or _last_paren_label(seg[:40], options)
        if label is not None:
            return label, seg
    label = _last_paren_label(text, options) or _label(text.strip().rstrip("."), options, True)
    return label, (f"({label})" if label else None)

"""Rows of the code benchmarks (MBPP, HumanEval) and of ARC's multiple choice, in the project's columns.

MBPP and HumanEval items are graded by running code (answer type ``code``: the gold is the tests, see
:func:`grpo_budget.generation.codegrade.gold`); ARC's by its choice label (answer type ``choice``: the gold is the
label and every choice's text, see :func:`grpo_budget.generation.choices.gold`).
"""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np
import pandas as pd

from grpo_budget.generation import choices, codegrade
from grpo_budget.prepare.rows import _column, _item_ids, _safe_id, _text
from grpo_budget.prepare.userrows import FIRST_CALL, choice_label, options as parse_options

# MBPP's published split by task_id (Austin et al. 2021): a local copy is one file of all 974 tasks.
MBPP_SPLITS = {"prompt": (1, 10), "test": (11, 510), "validation": (511, 600), "train": (601, 974)}


def mbpp_splits(source: dict[str, pd.DataFrame], fields: dict) -> dict[str, pd.DataFrame]:
    """A copy's splits: the hub's named splits as they are; one local file of every task cut by task id."""
    if len(source) != 1 or set(source) & (set(MBPP_SPLITS) - {"train"}):
        return source
    frame = next(iter(source.values()))
    ids = _column(frame, fields, "id")
    if ids is None:
        return source
    task = pd.to_numeric(ids, errors="coerce")
    return {name: frame[(task >= lo) & (task <= hi)].reset_index(drop=True) for name, (lo, hi) in MBPP_SPLITS.items()}


def _list(value: Any) -> list[str]:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return []
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value]


def _setup(value: Any) -> str:
    return "\n".join(_list(value)).replace("\r\n", "\n")


def mbpp(frame: pd.DataFrame, fields: dict) -> pd.DataFrame:
    """MBPP (full or sanitized): the task and its tests as the prompt (the tests name the function), the tests as
    the gold, the reference ``code`` in a fenced block as the solution."""
    n = len(frame)
    texts = _text(_column(frame, fields, "question", required=True), n)
    tests = [[t.replace("\r\n", "\n") for t in _list(v)] for v in _column(frame, fields, "tests", required=True)]
    setup_col = _column(frame, fields, "setup")
    setups = [_setup(v) for v in setup_col] if setup_col is not None else [""] * n
    codes = _text(_column(frame, fields, "solution"), n)
    entry = [(m.group(1) if (m := FIRST_CALL.search(t[0])) else None) if t else None for t in tests]
    prompts = [f"{q.strip()}\nYour code should pass these tests:\n\n" + "\n".join(t) for q, t in zip(texts, tests)]
    return pd.DataFrame({
        "id": _item_ids(frame, fields, "mbpp", texts),
        "prompt": prompts,
        "answer": [codegrade.gold(t, s, "", e) if t else None for t, s, e in zip(tests, setups, entry)],
        "answer_type": "code",
        "solution": [None if c is None else f"```python\n{c.replace(chr(13) + chr(10), chr(10))}\n```" for c in codes],
        "n_tests": pd.array([len(t) for t in tests], dtype="int64"),
    })


def humaneval(frame: pd.DataFrame, fields: dict) -> pd.DataFrame:
    """HumanEval: the signature and docstring as the prompt and the gold's prefix, ``check(entry_point)`` as the
    one test, the prompt completed by the canonical body (fenced) as the solution."""
    n = len(frame)
    prompts = _text(_column(frame, fields, "question", required=True), n)
    tests = _text(_column(frame, fields, "tests", required=True), n)
    entries = _text(_column(frame, fields, "entry_point", required=True), n)
    bodies = _text(_column(frame, fields, "solution"), n)
    return pd.DataFrame({
        "id": _item_ids(frame, fields, "humaneval", prompts),
        "prompt": [p.rstrip() + "\n" for p in prompts],
        "answer": [codegrade.gold([f"{t}\ncheck({e})"], "", p, e) if t and e else None
                   for p, t, e in zip(prompts, tests, entries)],
        "answer_type": "code",
        "solution": [None if b is None else f"```python\n{p}{b}```" for p, b in zip(prompts, bodies)],
        "n_lines": pd.array([len((b or "").strip().splitlines()) for b in bodies], dtype="int64"),
    })


def arc(frame: pd.DataFrame, fields: dict) -> pd.DataFrame:
    """ARC: the stem and its labelled choices as the prompt, the gold label (with every choice's text, for
    lenient grading) as the answer, the right choice written as a short boxed completion as the solution."""
    n = len(frame)
    questions = _column(frame, fields, "question", required=True)
    keys = _text(_column(frame, fields, "answer", required=True), n)
    listed = _column(frame, fields, "choices")  # the hub's copy: {text: [...], label: [...]} beside a plain question
    stems, options = [], []
    for i, q in enumerate(questions):
        q = json.loads(q) if isinstance(q, str) and q.lstrip().startswith("{") else q
        if isinstance(q, dict):  # AI2's release files: {stem, choices: [{text, label}]}
            stems.append(str(q["stem"]).strip())
            options.append([(str(c["label"]).strip(), str(c["text"]).strip()) for c in q["choices"]])
        else:  # the hub's {label, text}, or a plain list of options (labelled A, B, ...) or a {label: text} mapping
            stems.append(str(q).strip())
            options.append((parse_options(listed.iloc[i]) if listed is not None else None) or [])
    prompts = [s + "\n\nOptions:\n" + "\n".join(f"({lab}) {txt}" for lab, txt in o) for s, o in zip(stems, options)]
    labels = [choice_label(k, o) if o else None for k, o in zip(keys, options)]  # a label, a 0-based index or a text
    answers = [None if lab is None else choices.gold(lab, o) for lab, o in zip(labels, options)]
    solutions = [None if lab is None else f"The answer is ({lab}) {dict(o)[lab]}. \\boxed{{({lab})}}"
                 for lab, o in zip(labels, options)]
    id_col = _column(frame, fields, "id")
    ids = [f"arc-{_safe_id(i)}" for i in id_col] if id_col is not None else _item_ids(frame, fields, "arc", prompts)
    return pd.DataFrame({"id": ids, "prompt": prompts, "answer": answers, "answer_type": "choice",
                         "solution": solutions, "n_choices": pd.array([len(o) for o in options], dtype="int64")})

"""Rows of the code benchmarks (MBPP, HumanEval) in the project's columns: their items are graded by running code
(answer type ``code``: the gold is the tests, see :func:`grpo_budget.generation.codegrade.gold`)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from grpo_budget.generation import codegrade
from grpo_budget.prepare.rows import column, item_ids, safe_id, text_list
from grpo_budget.prepare.userrows import FIRST_CALL

# MBPP's published split by task_id (Austin et al. 2021): a local copy is one file of all 974 tasks.
MBPP_SPLITS = {"prompt": (1, 10), "test": (11, 510), "validation": (511, 600), "train": (601, 974)}


def mbpp_splits(source: dict[str, pd.DataFrame], fields: dict) -> dict[str, pd.DataFrame]:
    """A copy's splits: the hub's named splits as they are; one local file of every task cut by task id."""
    if len(source) != 1 or set(source) & (set(MBPP_SPLITS) - {"train"}):
        return source
    frame = next(iter(source.values()))
    ids = column(frame, fields, "id")
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


def mbpp_rows(frame: pd.DataFrame, fields: dict) -> pd.DataFrame:
    """MBPP (full or sanitized): the task and its tests as the prompt (the tests name the function), the tests as
    the gold, the reference ``code`` in a fenced block as the solution."""
    n = len(frame)
    texts = text_list(column(frame, fields, "question", required=True), n)
    tests = [[t.replace("\r\n", "\n") for t in _list(v)] for v in column(frame, fields, "tests", required=True)]
    setup_col = column(frame, fields, "setup")
    setups = [_setup(v) for v in setup_col] if setup_col is not None else [""] * n
    codes = text_list(column(frame, fields, "solution"), n)
    entry = [(m.group(1) if (m := FIRST_CALL.search(t[0])) else None) if t else None for t in tests]
    prompts = [f"{q.strip()}\nYour code should pass these tests:\n\n" + "\n".join(t) for q, t in zip(texts, tests)]
    return pd.DataFrame({
        "id": item_ids(frame, fields, "mbpp", texts),
        "prompt": prompts,
        "answer": [codegrade.gold(t, s, "", e) if t else None for t, s, e in zip(tests, setups, entry)],
        "answer_type": "code",
        "solution": [None if c is None else f"```python\n{c.replace(chr(13) + chr(10), chr(10))}\n```" for c in codes],
        "n_tests": pd.array([len(t) for t in tests], dtype="int64"),
    })


def humaneval_rows(frame: pd.DataFrame, fields: dict) -> pd.DataFrame:
    """HumanEval: the signature and docstring as the prompt and the gold's prefix, ``check(entry_point)`` as the
    one test, the prompt completed by the canonical body (fenced) as the solution."""
    n = len(frame)
    prompts = text_list(column(frame, fields, "question", required=True), n)
    tests = text_list(column(frame, fields, "tests", required=True), n)
    entries = text_list(column(frame, fields, "entry_point", required=True), n)
    bodies = text_list(column(frame, fields, "solution"), n)
    return pd.DataFrame({
        "id": item_ids(frame, fields, "humaneval", prompts),
        "prompt": [p.rstrip() + "\n" for p in prompts],
        "answer": [codegrade.gold([f"{t}\ncheck({e})"], "", p, e) if t and e else None
                   for p, t, e in zip(prompts, tests, entries)],
        "answer_type": "code",
        "solution": [None if b is None else f"```python\n{p}{b}```" for p, b in zip(prompts, bodies)],
        "n_lines": pd.array([len((b or "").strip().splitlines()) for b in bodies], dtype="int64"),
    })

"""Per-benchmark row conversion: a copy's columns (through the spec's ``fields``) onto the project's columns,
gold answers and ids."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from grpo_budget.errors import UserError
from grpo_budget.generation.extract import last_boxed

_PLAIN_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def _hash(text: str, n: int = 12) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:n]


def _unique(ids: Iterable[str]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for i in ids:
        k = seen.get(i, 0)
        seen[i] = k + 1
        out.append(i if k == 0 else f"{i}-dup{k}")
    return out


def _safe_id(value: Any) -> str:
    s = str(value).strip()
    s = re.sub(r"\.json$", "", s)
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", s).strip("-")


def _column(frame: pd.DataFrame, fields: dict, key: str, required: bool = False) -> pd.Series | None:
    """The copy's column for ``key``: ``fields[key]`` is a column name or a list of candidates (first present)."""
    wanted = fields.get(key)
    candidates = wanted if isinstance(wanted, (list, tuple)) else [wanted]
    for col in candidates:
        if col is not None and col in frame.columns:
            return frame[col]
    if required:
        raise UserError(
            f"the data has no column {' or '.join(map(repr, candidates))} for {key!r} (columns: "
            f"{', '.join(map(str, frame.columns))}); map it with the dataset's spec: {{fields: {{{key}: COLUMN}}}} "
            f"(check-grader: --field {key}=COLUMN)"
        )
    return None


# --------------------------------------------------------------------------- gold answers


def gsm8k_gold(solution: str) -> str | None:
    """The number after the last ``####`` with thousands separators removed."""
    if not isinstance(solution, str) or "####" not in solution:
        return None
    gold = solution.rsplit("####", 1)[1].strip().replace(",", "").replace("$", "").strip()
    return gold or None


def math_gold(solution: str) -> str | None:
    """The content of the last ``\\boxed{...}`` of a MATH solution."""
    if not isinstance(solution, str):
        return None
    gold = last_boxed(solution)
    return gold.strip() if gold is not None else None


def _normalize_number(value: Any) -> str | None:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return None
    s = str(value).strip().replace(",", "").replace("$", "")
    if re.fullmatch(r"-?\d+", s):
        return str(int(s))
    if re.fullmatch(r"-?\d+\.\d+", s):
        f = float(s)
        return str(int(f)) if f == int(f) else s
    boxed = last_boxed(s)
    return _normalize_number(boxed) if boxed else (s or None)


def _level(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, (int, np.integer)):
        return int(value) if 1 <= int(value) <= 5 else None
    m = re.search(r"(\d+)", str(value))
    if m and 1 <= int(m.group(1)) <= 5:
        return int(m.group(1))
    return None


def _text(series: pd.Series | None, n: int) -> list:
    if series is None:
        return [None] * n
    return [None if v is None or (isinstance(v, float) and np.isnan(v)) else str(v) for v in series]


# --------------------------------------------------------------------------- per benchmark


def _item_ids(frame: pd.DataFrame, fields: dict, prefix: str, questions: list) -> list[str]:
    """``prefix-<the copy's id>`` where the copy has an id column, else ``prefix-<hash of the question>``."""
    id_col = _column(frame, fields, "id")
    if id_col is not None:
        return [f"{prefix}-{_safe_id(i)}" for i in id_col]
    return [f"{prefix}-{_hash(q)}" for q in questions]


def _gsm8k(frame: pd.DataFrame, fields: dict) -> pd.DataFrame:
    questions = _text(_column(frame, fields, "question", required=True), len(frame))
    solutions = _text(_column(frame, fields, "solution"), len(frame))
    answers_col = _column(frame, fields, "answer")
    if answers_col is not None and (fields.get("answer") is None or fields.get("answer") != fields.get("solution")):
        answers = [_normalize_number(a) for a in answers_col]
    else:
        answers = [gsm8k_gold(s) for s in solutions]

    def steps(sol: str | None) -> int:
        if not sol:
            return 0
        n = len(re.findall(r"<<[^<>]*>>", sol))
        if n:
            return n
        return sum(1 for line in sol.splitlines() if line.strip() and not line.strip().startswith("####"))

    ids = _item_ids(frame, fields, "gsm8k", questions)
    return pd.DataFrame(
        {
            "id": _unique(ids),
            "prompt": [q.strip() for q in questions],
            "answer": answers,
            "answer_type": "number",
            "solution": solutions,
            "n_steps": pd.array([steps(s) for s in solutions], dtype="int64"),
        }
    )


def _math(frame: pd.DataFrame, fields: dict, prefix: str = "math") -> pd.DataFrame:
    questions = _text(_column(frame, fields, "question", required=True), len(frame))
    solutions = _text(_column(frame, fields, "solution"), len(frame))
    answers_col = _column(frame, fields, "answer")
    if answers_col is not None:
        answers = [math_gold(a) if isinstance(a, str) and "\\boxed" in a else (None if a is None else str(a).strip()) for a in answers_col]
    else:
        answers = [math_gold(s) for s in solutions]
    levels = _column(frame, fields, "level")
    types = _column(frame, fields, "type")
    ids = _item_ids(frame, fields, prefix, questions)
    return pd.DataFrame(
        {
            "id": _unique(ids),
            "prompt": [q.strip() for q in questions],
            "answer": answers,
            "answer_type": "math",
            "solution": solutions,
            "level": pd.array([_level(v) for v in levels] if levels is not None else [None] * len(frame), dtype="Int64"),
            "type": _text(types, len(frame)),
            "numeric": [bool(a is not None and _PLAIN_NUMBER.fullmatch(a)) for a in answers],
        }
    )


def _aime(frame: pd.DataFrame, fields: dict) -> pd.DataFrame:
    questions = _text(_column(frame, fields, "question", required=True), len(frame))
    answers = [_normalize_number(a) for a in _column(frame, fields, "answer", required=True)]
    solutions = _text(_column(frame, fields, "solution"), len(frame))
    ids = _item_ids(frame, fields, "aime2025", questions)
    out = pd.DataFrame(
        {
            "id": _unique(ids),
            "prompt": [q.strip() for q in questions],
            "answer": answers,
            "answer_type": "number",
            "solution": solutions,
        }
    )
    part = _column(frame, fields, "part")  # AIME 2025-I or -II: a column of local copies, or the hub config
    if part is not None:
        out["part"] = part.astype(str).to_numpy()
    elif "_config" in frame.columns:
        out["part"] = frame["_config"].astype(str).to_numpy()
    return out


_OPTION_LINE = re.compile(r"^\(([A-G])\) ", re.MULTILINE)
_SWAP_SENTENCE = re.compile(r"(?:First|Then|Finally), \w+ and \w+ ")


def _bbh_solution(prompt: str, target: str) -> str:
    """The gold target written as a completion (a short BBH-style answer, boxed)."""
    second = prompt.split("\n")[1] if "\n" in prompt else ""
    m = re.search(r"(At the end of the [^,]+, .+)$", second)
    stem = m.group(1) if m else "The answer"
    letter = target.strip("() ")
    option = re.search(r"^\(" + re.escape(letter) + r"\) (.+)$", prompt, re.MULTILINE)
    obj = option.group(1) if option else target
    return f"Let's think step by step.\n{stem} {obj}. So the answer is \\boxed{{{target}}}."


def _bbh_frame(frame: pd.DataFrame, fields: dict) -> pd.DataFrame:
    questions = _text(_column(frame, fields, "question", required=True), len(frame))
    targets = []
    for t in _column(frame, fields, "answer", required=True):
        t = str(t).strip()
        targets.append(f"({t})" if re.fullmatch(r"[A-G]", t) else t)
    n_objects = [len(_OPTION_LINE.findall(q)) for q in questions]
    n_swaps = [len(_SWAP_SENTENCE.findall(q)) for q in questions]
    id_col = _column(frame, fields, "id")
    if id_col is not None:
        ids = [f"bbh-so{n}-{_safe_id(i)}" for n, i in zip(n_objects, id_col)]
    else:
        ids = [f"bbh-so{n}-{_hash(q)}" for n, q in zip(n_objects, questions)]
    return pd.DataFrame(
        {
            "id": ids,
            "prompt": [q.strip() for q in questions],
            "answer": targets,
            "answer_type": "option",
            "solution": [_bbh_solution(q, t) for q, t in zip(questions, targets)],
            "n_objects": pd.array(n_objects, dtype="int64"),
            "n_swaps": pd.array(n_swaps, dtype="int64"),
        }
    )

"""Per-benchmark row conversion of the benchmarks graded by their answer (GSM8K, MATH, AIME, BBH, ARC; the code
benchmarks are in :mod:`grpo_budget.prepare.coderows`): a copy's columns (through the spec's ``fields``) onto the
project's columns, gold answers and ids, with the helpers every converter shares; repeated questions and ids
(:func:`drop_repeats`, :func:`refuse_repeated_ids`), overlong questions (:func:`refuse_long_prompts`)."""

from __future__ import annotations

import hashlib
import json
import logging
import re
import unicodedata
from typing import Any

import numpy as np
import pandas as pd

from grpo_budget.errors import UserError
from grpo_budget.generation.choices import gold as choice_gold
from grpo_budget.generation.extract import last_boxed
from grpo_budget.prepare.userrows import choice_label, options as parse_options

log = logging.getLogger(__name__)

_PLAIN_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def short_hash(text: str, n: int = 12) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:n]


def safe_id(value: Any) -> str:
    s = str(value).strip()
    s = re.sub(r"\.json$", "", s)
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", s).strip("-")


def normalized(text: Any) -> str:
    """``text`` as repeats and leaks are compared: Unicode NFKC, case-folded, each run of whitespace one space,
    stripped (a doubled space or a capital letter does not make another question)."""
    return " ".join(unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", str(text)).casefold()).split())


def excerpt(text: Any, n: int = 60) -> str:
    """``text`` on one line and at most ``n`` characters (an example in a one-line message)."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= n else flat[: max(n - 3, 1)].rstrip() + "..."


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and np.isnan(value)) or str(value).strip() == ""


def drop_repeats(frame: pd.DataFrame, where: str = "the data") -> pd.DataFrame:
    """``frame`` without the rows whose :func:`normalized` prompt repeats an earlier row's, with a one-line warning
    (count and an example). Each question keeps its first row with a gold answer (else its first row). A question
    repeated with different gold answers is a :class:`UserError`: which gold is right cannot be told here."""
    keys = frame["prompt"].map(normalized).reset_index(drop=True)
    golds = frame["answer"].map(lambda a: None if _missing(a) else str(a).strip()).reset_index(drop=True)
    spread = pd.DataFrame({"key": keys, "gold": golds}).dropna().groupby("key", sort=False)["gold"].nunique()
    conflicting = spread[spread > 1]
    if len(conflicting):
        same = (keys == conflicting.index[0]).to_numpy()
        shown = ", ".join(dict.fromkeys(repr(g) for g in golds[same].dropna()))
        ids = ", ".join(frame["id"].astype(str).to_numpy()[same])
        raise UserError(f"{where}: {len(conflicting)} question(s) appear more than once with different gold answers "
                        f"(e.g. {excerpt(frame['prompt'].to_numpy()[same][0])!r} with {shown}: ids {ids}); keep the "
                        "row with the right answer and drop the others from the data")
    # Rows with a gold answer first (stable), so a repeat never replaces a gradable row with an ungradable one.
    order = np.argsort(golds.isna().to_numpy(), kind="stable")
    kept = np.sort(order[~keys.iloc[order].duplicated().to_numpy()])
    if len(kept) < len(frame):
        dropped = np.setdiff1d(np.arange(len(frame)), kept)[0]
        twin = kept[keys.iloc[kept].to_numpy() == keys.iloc[dropped]][0]
        ids = frame["id"].astype(str).to_numpy()
        log.warning("%s: dropped %d repeated question(s), the same text and gold answer as an earlier item once case, "
                    "Unicode form and spacing are ignored (e.g. %s, a repeat of %s: %r)", where,
                    len(frame) - len(kept), ids[dropped], ids[twin], excerpt(frame["prompt"].iloc[dropped]))
    return frame.iloc[kept].reset_index(drop=True)


def refuse_repeated_ids(frame: pd.DataFrame, where: str = "the data") -> None:
    """A :class:`UserError` where one id names different questions (after :func:`drop_repeats`, only a copy's id
    column can do that: ids from a hash of the question are unique)."""
    repeated = frame["id"].duplicated(keep=False).to_numpy()
    if repeated.any():
        first = frame["id"].to_numpy()[repeated][0]
        prompts = frame.loc[frame["id"] == first, "prompt"]
        raise UserError(f"{where}: {frame['id'][repeated].nunique()} id(s) are given to more than one question (e.g. "
                        f"{first} for {excerpt(prompts.iloc[0], 40)!r} and {excerpt(prompts.iloc[1], 40)!r}); map a "
                        "column of unique ids with the dataset's spec: {fields: {id: COLUMN}}, or none "
                        "({fields: {id: null}}) for ids from a hash of the question")


def refuse_long_prompts(frame: pd.DataFrame, limit: int, where: str) -> pd.DataFrame:
    """``frame`` (rows in the copy's order) when no question is longer than ``limit`` characters (the dataset's
    ``spec.max_prompt_chars``); else a :class:`UserError` naming the first such row: a corrupt row would otherwise
    be tokenized, scored and trained on like any other."""
    lengths = frame["prompt"].map(lambda q: len(q) if isinstance(q, str) else 0).to_numpy()
    long = np.flatnonzero(lengths > limit)
    if len(long):
        i = int(long[0])
        raise UserError(f"{where}: row {i + 1} (id {frame['id'].iloc[i]}) has a question of {lengths[i]:,} "
                        f"characters, above spec.max_prompt_chars ({limit:,}; {len(long)} row(s) are over it); fix or "
                        "drop those rows, or raise the dataset's spec.max_prompt_chars")
    return frame


def column(frame: pd.DataFrame, fields: dict, key: str, required: bool = False) -> pd.Series | None:
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


def text_list(series: pd.Series | None, n: int) -> list:
    if series is None:
        return [None] * n
    return [None if v is None or (isinstance(v, float) and np.isnan(v)) else str(v) for v in series]


# --------------------------------------------------------------------------- per benchmark


def item_ids(frame: pd.DataFrame, fields: dict, prefix: str, questions: list) -> list[str]:
    """``prefix-<the copy's id>`` where the copy has an id column, else ``prefix-<hash of the question>``."""
    id_col = column(frame, fields, "id")
    if id_col is not None:
        return [f"{prefix}-{safe_id(i)}" for i in id_col]
    return [f"{prefix}-{short_hash(q)}" for q in questions]


def gsm8k_rows(frame: pd.DataFrame, fields: dict) -> pd.DataFrame:
    questions = text_list(column(frame, fields, "question", required=True), len(frame))
    solutions = text_list(column(frame, fields, "solution"), len(frame))
    answers_col = column(frame, fields, "answer")
    if answers_col is not None:  # a mapped answer column: plain numbers, or solutions ending in '#### <number>'
        answers = [gsm8k_gold(a) if isinstance(a, str) and "####" in a else _normalize_number(a) for a in answers_col]
    else:
        answers = [gsm8k_gold(s) for s in solutions]

    def steps(sol: str | None) -> int:
        if not sol:
            return 0
        n = len(re.findall(r"<<[^<>]*>>", sol))
        if n:
            return n
        return sum(1 for line in sol.splitlines() if line.strip() and not line.strip().startswith("####"))

    ids = item_ids(frame, fields, "gsm8k", questions)
    return pd.DataFrame(
        {
            "id": ids,
            "prompt": [q.strip() for q in questions],
            "answer": answers,
            "answer_type": "number",
            "solution": solutions,
            "n_steps": pd.array([steps(s) for s in solutions], dtype="int64"),
        }
    )


def math_rows(frame: pd.DataFrame, fields: dict, prefix: str = "math") -> pd.DataFrame:
    questions = text_list(column(frame, fields, "question", required=True), len(frame))
    solutions = text_list(column(frame, fields, "solution"), len(frame))
    answers_col = column(frame, fields, "answer")
    if answers_col is not None:
        answers = [math_gold(a) if isinstance(a, str) and "\\boxed" in a else (None if a is None else str(a).strip()) for a in answers_col]
    else:
        answers = [math_gold(s) for s in solutions]
    levels = column(frame, fields, "level")
    types = column(frame, fields, "type")
    ids = item_ids(frame, fields, prefix, questions)
    return pd.DataFrame(
        {
            "id": ids,
            "prompt": [q.strip() for q in questions],
            "answer": answers,
            "answer_type": "math",
            "solution": solutions,
            "level": pd.array([_level(v) for v in levels] if levels is not None else [None] * len(frame), dtype="Int64"),
            "type": text_list(types, len(frame)),
            "numeric": [bool(a is not None and _PLAIN_NUMBER.fullmatch(a)) for a in answers],
        }
    )


def aime_rows(frame: pd.DataFrame, fields: dict) -> pd.DataFrame:
    questions = text_list(column(frame, fields, "question", required=True), len(frame))
    answers = [_normalize_number(a) for a in column(frame, fields, "answer", required=True)]
    solutions = text_list(column(frame, fields, "solution"), len(frame))
    ids = item_ids(frame, fields, "aime2025", questions)
    out = pd.DataFrame(
        {
            "id": ids,
            "prompt": [q.strip() for q in questions],
            "answer": answers,
            "answer_type": "number",
            "solution": solutions,
        }
    )
    part = column(frame, fields, "part")  # AIME 2025-I or -II: a column of local copies, or the hub config
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


def bbh_rows(frame: pd.DataFrame, fields: dict) -> pd.DataFrame:
    questions = text_list(column(frame, fields, "question", required=True), len(frame))
    targets = []
    for t in column(frame, fields, "answer", required=True):
        t = str(t).strip()
        targets.append(f"({t})" if re.fullmatch(r"[A-G]", t) else t)
    n_objects = [len(_OPTION_LINE.findall(q)) for q in questions]
    n_swaps = [len(_SWAP_SENTENCE.findall(q)) for q in questions]
    id_col = column(frame, fields, "id")
    if id_col is not None:
        ids = [f"bbh-so{n}-{safe_id(i)}" for n, i in zip(n_objects, id_col)]
    else:
        ids = [f"bbh-so{n}-{short_hash(q)}" for n, q in zip(n_objects, questions)]
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


def arc_rows(frame: pd.DataFrame, fields: dict) -> pd.DataFrame:
    """ARC: the stem and its labelled choices as the prompt, the gold label (with every choice's text, for
    lenient grading) as the answer, the right choice written as a short boxed completion as the solution."""
    n = len(frame)
    questions = column(frame, fields, "question", required=True)
    keys = text_list(column(frame, fields, "answer", required=True), n)
    listed = column(frame, fields, "choices")  # the hub's copy: {text: [...], label: [...]} beside a plain question
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
    answers = [None if lab is None else choice_gold(lab, o) for lab, o in zip(labels, options)]
    solutions = [None if lab is None else f"The answer is ({lab}) {dict(o)[lab]}. \\boxed{{({lab})}}"
                 for lab, o in zip(labels, options)]
    id_col = column(frame, fields, "id")
    ids = [f"arc-{safe_id(i)}" for i in id_col] if id_col is not None else item_ids(frame, fields, "arc", prompts)
    return pd.DataFrame({"id": ids, "prompt": prompts, "answer": answers, "answer_type": "choice",
                         "solution": solutions, "n_choices": pd.array([len(o) for o in options], dtype="int64")})

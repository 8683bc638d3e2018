"""A user's own rows (``source: files``) in the project's columns.

``spec.fields`` maps the project's keys to the rows' columns: ``question`` (a column, or a template over columns
such as ``"{passage}\\n\\n{question}"``), ``answer`` (a column), ``choices`` (multiple choice: a column holding a
list of options, a ``{label: text}`` mapping or ARC's ``{label: [...], text: [...]}``, or a list of columns, one
option each), ``id`` (else a hash of the question), ``difficulty`` (copied to a ``difficulty`` column, which the
stratified analysis reads first) and ``solution`` (a worked solution; else the answer column's text where it holds
more than the answer). The gold answer follows the dataset's ``answer_type`` (:func:`gold`). Every column of the
rows also passes through under its own name (:func:`passthrough`), so ``filter:``, ``analysis.stratify_by`` and
reward functions can read it.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from grpo_budget.errors import UserError
from grpo_budget.generation import choices as choice_grading
from grpo_budget.generation import codegrade
from grpo_budget.generation.extract import anchor_segments, extract_number, format_number, last_boxed, \
    normalize_option

FIELD_KEYS = ("question", "answer", "choices", "id", "difficulty", "solution")
PROJECT = ("id", "prompt", "answer", "answer_type", "solution")
# Columns the later stages add to a pool's rows (score: grpo_budget.generation.sample.GRADED_COLUMNS,
# grpo_budget.select.posterior.EB_COLUMNS, grpo_budget.score.agreement.AGREEMENT_COLUMNS; select: rank, policy,
# difficulty, difficulty_source, scoring_labels; proxy arms: proxy_*): a user's column of one of these names is kept
# as user_<name> (tests/prepare/test_userfiles.py keeps this list in step with those).
LATER = ("samples", "answers", "correct", "format_ok", "n_samples", "n_correct", "pass_rate", "n_format_fail",
         "mean_completion_tokens", "n_truncated", "pass_rate_eb", "pass_rate_eb_lo", "pass_rate_eb_hi", "eb_prior_a",
         "eb_prior_b", "majority_answer", "majority_tied", "n_agree", "agreement", "answer_entropy", "rank", "policy",
         "difficulty", "difficulty_source", "scoring_labels", "step", "accuracy")
RENAMED = "user_{}"
LABELS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_PLACEHOLDER = re.compile(r"\{([^{}\s]+)\}")
FIRST_CALL = re.compile(  # the function an assert calls: MBPP names it so
    r"assert\s+(?:not\s+)?\(?\s*(?:set\(|sorted\(|math\.isclose\()?\s*([A-Za-z_]\w*)\s*\(")
_PLAIN_NUMBER = re.compile(r"\s*[-+]?\$?\s*\d[\d,]*(?:\.\d+)?\s*%?\s*")

# What each answer type's gold answer may look like, for messages.
FORMS = {
    "number": "a number, or a text ending in 'The answer is <number>', '#### <number>' or \\boxed{<number>}",
    "math": "an answer in LaTeX, or a solution with it in the last \\boxed{}",
    "exact": "a non-empty string",
    "option": "an option letter such as B or (B)",
    "choice": "an option's label (B), its 0-based index (1, as MMLU's) or its text",
    "code": "a list of assert statements (or one string of them)",
}


def cell(value: Any) -> Any:
    """A table cell as plain Python: None for a missing value, lists for arrays, Python scalars for NumPy's."""
    if isinstance(value, np.ndarray):
        return [cell(v) for v in value.tolist()]
    if isinstance(value, np.generic):
        value = value.item()
    if value is None or (not isinstance(value, (list, tuple, dict)) and pd.isna(value) is True):
        return None
    return value


def _hash(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:12]


def is_template(value: str, columns) -> bool:
    """Whether a ``question`` field is a template (it is not a column, and names some column in braces)."""
    return value not in columns and any(m.group(1) in columns for m in _PLACEHOLDER.finditer(value))


def render(template: str, row: dict) -> str:
    """``template`` with each ``{column}`` replaced by the row's value; other braces (``\\boxed{}``) verbatim."""
    return _PLACEHOLDER.sub(lambda m: "" if m.group(1) in row and row[m.group(1)] is None
                            else str(row[m.group(1)]) if m.group(1) in row else m.group(0), template)


def options(value: Any) -> list[tuple[str, str]] | None:
    """An item's options as (label, text): a list of texts (labelled A, B, ...), a ``{label: text}`` mapping, ARC's
    ``{label: [...], text: [...]}``, a list of ``{label, text}``, or any of these as a JSON string; None otherwise."""
    value = cell(value)
    if isinstance(value, str) and value.strip()[:1] in ("[", "{"):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    if isinstance(value, dict):
        value = {k: cell(v) for k, v in value.items()}
        if set(value) >= {"label", "text"} and isinstance(value["label"], list):
            pairs = list(zip(value["label"], value["text"]))
        else:
            pairs = list(value.items())
    elif isinstance(value, (list, tuple)):
        value = [{k: cell(x) for k, x in v.items()} if isinstance(v, dict) else cell(v) for v in value]
        if value and all(isinstance(v, dict) and {"label", "text"} <= set(v) for v in value):
            pairs = [(v["label"], v["text"]) for v in value]
        elif all(not isinstance(v, (dict, list, tuple)) for v in value) and len(value) <= len(LABELS):
            pairs = list(zip(LABELS, value))
        else:
            return None
    else:
        return None
    out = [(str(cell(a)).strip(), "" if cell(b) is None else str(cell(b)).strip()) for a, b in pairs]
    return out if len(out) >= 2 and len({a for a, _ in out}) == len(out) else None


def choice_label(answer: Any, opts: list[tuple[str, str]]) -> str | None:
    """The label ``answer`` names among ``opts``: a label (``B``, ``(B)``, ``b``), else a 0-based index (an integer,
    as MMLU's ``answer: 1``), else an option's text; None when it names none."""
    answer = cell(answer)
    if answer is None or isinstance(answer, (list, dict)):
        return None
    labels = [lab for lab, _ in opts]
    s = str(answer).strip().strip("()").strip()
    for lab in labels:
        if s == lab or s.upper() == lab.upper():
            return lab
    if isinstance(answer, (int, float)) and not isinstance(answer, bool) and float(answer).is_integer() \
            or re.fullmatch(r"\d+", s):
        i = int(float(s))
        return labels[i] if 0 <= i < len(labels) else None
    texts = [lab for lab, text in opts if " ".join(text.casefold().split()) == " ".join(s.casefold().split())]
    return texts[0] if len(texts) == 1 else None


def options_block(opts: list[tuple[str, str]]) -> str:
    """The options as the prompt lists them (ARC's layout, which the choice grader reads)."""
    return "Options:\n" + "\n".join(f"({lab}) {text}" for lab, text in opts)


def gold(answer_type: str, value: Any, opts: list[tuple[str, str]] | None = None) -> tuple[str | None, str | None]:
    """(the gold answer as the grader reads it, a worked solution where the value held more than the answer);
    (None, None) when the value holds no answer of that type."""
    value = cell(value)
    if value is None:
        return None, None
    if answer_type == "code":
        tests = [str(t) for t in value] if isinstance(value, list) else [str(value)] if str(value).strip() else []
        if not tests:
            return None, None
        m = FIRST_CALL.search(tests[0])
        return codegrade.gold(tests, "", "", m.group(1) if m else None), None
    if answer_type == "choice":
        label = choice_label(value, opts or [])
        return (choice_grading.gold(label, opts) if label is not None else None), None
    if isinstance(value, (list, dict)):
        return None, None
    text = str(value).strip()
    if not text:
        return None, None
    if answer_type == "exact":
        return text, None
    if answer_type == "option":
        letter = normalize_option(text)
        return (f"({letter})" if letter else None), None
    if answer_type == "number":
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return format_number(float(value)), None
        number, _ = extract_number(text, "lenient", None)
        plain = bool(_PLAIN_NUMBER.fullmatch(text))
        return (None if number is None else format_number(number)), (None if plain else text)
    # math: the last box of a worked solution, else the text after its last "the answer is", else the text itself
    box = last_boxed(text)
    if box is not None and box.strip():
        return box.strip(), (text if text != box.strip() else None)
    for seg in anchor_segments(text):
        first = seg.strip().split("\n")[0].strip().rstrip(".").strip().strip("$").strip()
        if first:
            return first, text
    return text, None


def column_of(frame: pd.DataFrame, fields: dict, key: str, where: str, required: bool = False) -> str | None:
    """The column ``spec.fields[key]`` names, checked to be one of the rows' (a one-line error naming the file, the
    field and the columns there are otherwise)."""
    name = fields.get(key)
    if name is None:
        if required:
            raise UserError(f"{where}: spec.fields.{key} is required for source: files; allowed: one of its columns "
                            f"({', '.join(map(str, frame.columns))})")
        return None
    if name not in frame.columns:
        raise UserError(f"{where}: spec.fields.{key} names column {name!r}, which is not in the data; allowed: one "
                        f"of its columns ({', '.join(map(str, frame.columns))})")
    return name


def _item_options(frame: pd.DataFrame, fields: dict, where: str) -> list[list[tuple[str, str]] | None]:
    spec = fields.get("choices")
    if spec is None:
        raise UserError(f"{where}: answer_type choice needs spec.fields.choices: a column of options (a list, a "
                        "{label: text} mapping or {label: [...], text: [...]}) or a list of columns, one option each")
    if isinstance(spec, list):
        missing = [c for c in spec if c not in frame.columns]
        if missing:
            raise UserError(f"{where}: spec.fields.choices names column {missing[0]!r}, which is not in the data; "
                            f"allowed: its columns ({', '.join(map(str, frame.columns))})")
        return [[(LABELS[i], "" if cell(row[c]) is None else str(cell(row[c])).strip()) for i, c in enumerate(spec)]
                for _, row in frame[spec].iterrows()]
    column = column_of(frame, fields, "choices", where)
    found = [options(v) for v in frame[column]]
    bad = [i for i, o in enumerate(found) if o is None]
    if bad:
        raise UserError(f"{where}: row {bad[0] + 1}, column {column!r} (spec.fields.choices): "
                        f"{_excerpt(frame[column].iloc[bad[0]])!r} is not a set of options; allowed: a list of at "
                        f"least two texts, a {{label: text}} mapping or {{label: [...], text: [...]}}")
    return found


def _excerpt(value: Any, n: int = 60) -> str:
    flat = " ".join(str(cell(value)).split())
    return flat if len(flat) <= n else flat[: n - 3] + "..."


def questions(frame: pd.DataFrame, fields: dict, where: str) -> list[str | None]:
    """Each row's question: the column ``spec.fields.question`` names, or that template filled in per row."""
    spec = fields.get("question")
    if spec is None:
        raise UserError(f"{where}: spec.fields.question is required for source: files; allowed: a column "
                        f"({', '.join(map(str, frame.columns))}) or a template over columns such as "
                        "'{context}\\n\\n{question}'")
    if spec in frame.columns:
        return [None if cell(v) is None else str(cell(v)).strip() for v in frame[spec]]
    if not is_template(spec, frame.columns):
        raise UserError(f"{where}: spec.fields.question {spec!r} is neither a column nor a template naming columns "
                        f"in braces; allowed: one of its columns ({', '.join(map(str, frame.columns))}) or a template "
                        "such as '{context}\\n\\n{question}'")
    return [render(spec, {k: cell(v) for k, v in row.items()}).strip() for row in frame.to_dict("records")]


def rows(frame: pd.DataFrame, fields: dict, answer_type: str, where: str) -> pd.DataFrame:
    """The project's columns for ``frame``'s rows, then its difficulty column, then every column of the rows."""
    asked = questions(frame, fields, where)
    answer_col = column_of(frame, fields, "answer", where, required=True)
    opts = _item_options(frame, fields, where) if answer_type == "choice" else [None] * len(frame)
    template = fields.get("question") if fields.get("question") not in frame.columns else ""
    prompts = []
    for q, o in zip(asked, opts):
        if q is not None and o is not None:  # the options where the template puts {choices}, else after the question
            q = q.replace("{choices}", options_block(o)) if "{choices}" in template else f"{q}\n\n{options_block(o)}"
        prompts.append(q)
    golds = [gold(answer_type, v, o) for v, o in zip(frame[answer_col], opts)]
    solution_col = column_of(frame, fields, "solution", where)
    solutions = ([None if cell(v) is None else str(cell(v)) for v in frame[solution_col]] if solution_col
                 else [s for _, s in golds])
    id_col = column_of(frame, fields, "id", where)
    ids = [str(cell(i)).strip() if id_col and cell(i) is not None and str(cell(i)).strip() else _hash(p or "")
           for i, p in zip(frame[id_col] if id_col else [None] * len(frame), prompts)]
    out = pd.DataFrame({"id": ids, "prompt": prompts, "answer": [g for g, _ in golds], "answer_type": answer_type,
                        "solution": solutions})
    difficulty_col = column_of(frame, fields, "difficulty", where)
    if difficulty_col is not None:
        out["difficulty"] = [cell(v) for v in frame[difficulty_col]]
    return passthrough(out, frame)


def storable(values: list) -> list:
    """``values`` as Parquet can hold them: as they are, or (a column mixing kinds, such as numbers and texts in one
    JSON field) each as its text, JSON for lists and mappings."""
    try:
        pa.array(values)
        return values
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, OverflowError):
        return [v if v is None or isinstance(v, str) else json.dumps(v, default=str) if isinstance(v, (list, dict))
                else str(v) for v in values]


def passthrough(out: pd.DataFrame, frame: pd.DataFrame) -> pd.DataFrame:
    """``out`` with every column of the user's ``frame``: under its own name, or as ``user_<name>`` where the name
    is one of the project's or the later stages' columns and the values differ from the project's."""
    added = {}
    for name in frame.columns:
        values = [cell(v) for v in frame[name]]
        key = str(name)
        if key in out.columns or key in LATER or key.startswith("proxy_"):
            if key in out.columns and [cell(v) for v in out[key]] == values:
                continue  # the project's column already holds it (an id column named id, a question named prompt)
            key = RENAMED.format(key)
        added[key] = storable(values)
    return pd.concat([out, pd.DataFrame(added, index=out.index)], axis=1) if added else out

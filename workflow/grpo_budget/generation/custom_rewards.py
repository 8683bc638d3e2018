"""Your own grading and reward functions, by import path: ``FILE.py:NAME`` (a file, whose folder is put on the import
path so that it can import its neighbours) or ``MODULE:NAME`` (an installed or importable module).

The signature is TRL's reward function's: ``f(completions, **kwargs) -> list of numbers``, one per completion, called
with keywords: ``completions`` (the completions' text), ``prompts`` (the prompts the model was given) and every
column of the items' rows (a list per column, one entry per completion; the project's ``answer``, ``answer_type``,
``solution``, ``id`` and the user's own columns, but not ``prompt`` or the columns the workflow adds). A function may
name the keywords it reads or take ``**kwargs``. ``None`` for a completion means "no answer"; other values must be
numbers (or booleans).

A dataset's ``grading.function`` replaces its built-in grader everywhere: scoring the pool, training's rewards and
evaluation call the same function on the same columns, so the three cannot disagree. A completion is right where it
returns 1 or more (``correct``); its value is the ``partial`` reward; ``None`` is a format failure. A function named
in ``training.rewards`` adds its value, weighted, to training's reward only.

The code is the user's own, like the config: it runs in the job's process, as the user, without the sandbox that
model-written code runs in (:mod:`grpo_budget.generation.sandbox`).
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import inspect
import json
import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from grpo_budget.errors import UserError
from grpo_budget.generation.grading import Grade, completion_text
from grpo_budget.prepare.userrows import LATER, cell

ALWAYS = ("completions", "prompts")  # what every call passes besides the rows' columns
FORMS = "FILE.py:FUNCTION (a file, read from the config file's folder) or MODULE:FUNCTION"


def is_ref(name: str) -> bool:
    """Whether a reward name is an import path rather than a name of the registry."""
    return ":" in name


def short(ref: str) -> str:
    """A function's name in logs: ``module:function`` (a file's stem for its module)."""
    file, _, name = ref.rpartition(":")
    return f"{Path(file).stem if file.endswith('.py') else file}:{name}"


def file_of(ref: str) -> str | None:
    """The file a ``FILE.py:NAME`` reference reads (for records of what a job read); None for a module."""
    file, sep, _ = ref.rpartition(":")
    return file if sep and file.endswith(".py") else None


@functools.lru_cache(maxsize=None)
def load(ref: str) -> Callable:
    """The function ``ref`` names; a one-line :class:`UserError` when it cannot be imported or is not callable."""
    target, sep, name = ref.rpartition(":")
    if not sep or not target or not name:
        raise UserError(f"{ref!r} is not an import path; allowed: {FORMS}")
    try:
        if target.endswith(".py"):
            path = Path(target).resolve()
            if not path.is_file():
                raise UserError(f"{ref}: {target} does not exist; allowed: {FORMS}")
            folder = str(path.parent)
            if folder not in sys.path:
                sys.path.insert(0, folder)  # its own imports of neighbouring modules
            spec = importlib.util.spec_from_file_location(f"grpo_budget_user_{hashlib.sha1(str(path).encode()).hexdigest()[:8]}_{path.stem}", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        else:
            module = importlib.import_module(target)
    except UserError:
        raise
    except Exception as e:  # noqa: BLE001 - the user's module: whatever it raises on import is their mistake
        raise UserError(f"{ref}: cannot be imported ({type(e).__name__}: {' '.join(str(e).split())[:200]}); "
                        f"allowed: {FORMS}") from None
    fn = getattr(module, name, None)
    if not callable(fn):
        raise UserError(f"{ref}: {target} has no function {name!r}; allowed: {FORMS}")
    return fn


def check_signature(fn: Callable, ref: str, columns: Sequence[str]) -> None:
    """Refuse a function that cannot take the keywords it will be given: ``completions``, ``prompts`` and
    ``columns``, by name (a parameter it requires that none of these fills, or no ``completions``)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return  # a builtin or C function: its call will tell
    given = set(ALWAYS) | set(columns)
    var_kw = any(p.kind is p.VAR_KEYWORD for p in params)
    names = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    if "completions" not in names and not var_kw:
        raise UserError(f"{ref}: takes no 'completions'; allowed: TRL's reward signature, f(completions, **kwargs) "
                        "-> list of numbers")
    for p in params:
        if p.kind is p.POSITIONAL_ONLY or p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and \
                p.default is p.empty and p.name not in given:
            raise UserError(f"{ref}: its parameter {p.name!r} is none of the keywords it is called with (completions, "
                            f"prompts and the rows' columns: {', '.join(columns)}); allowed: those names, a default "
                            "for it, or **kwargs")


def columns_of(frame: pd.DataFrame) -> list[str]:
    """The columns of a table's rows a function is given: the data's own, not ``prompt`` (``prompts`` is given) nor
    the columns scoring and selection add, so that a pool, a subset and a test table give the same ones."""
    return [str(c) for c in frame.columns if c != "prompt" and c not in LATER and not str(c).startswith("proxy_")]


def _number(value: Any, ref: str) -> float | None:
    value = cell(value)
    if value is None:
        return None
    if isinstance(value, (bool, int, float)) and not (isinstance(value, float) and math.isnan(value)):
        return float(value)
    if isinstance(value, float):
        return None
    raise UserError(f"{ref}: returned {value!r} ({type(value).__name__}) for a completion; allowed: a number (or "
                    "None for no answer) per completion")


def call(fn: Callable, ref: str, completions: Sequence[Any], prompts: Sequence[Any],
         columns: dict[str, Sequence[Any]]) -> list[float | None]:
    """``fn``'s value for each completion (text, or TRL's chat messages), given ``prompts`` and the rows'
    ``columns`` (one entry per completion); a return that is not one number per completion is a :class:`UserError`."""
    texts = [completion_text(c) for c in completions]
    kwargs = {"completions": texts, "prompts": list(prompts), **{k: [cell(v) for v in vs] for k, vs in columns.items()}}
    try:
        params = inspect.signature(fn).parameters
        if not any(p.kind is p.VAR_KEYWORD for p in params.values()):
            kwargs = {k: v for k, v in kwargs.items() if k in params}
    except (TypeError, ValueError):
        pass
    try:
        out = fn(**kwargs)
    except UserError:
        raise
    except Exception as e:  # noqa: BLE001 - the user's function failed: name it, one line
        raise UserError(f"{ref}: raised {type(e).__name__} ({' '.join(str(e).split())[:200]}) on "
                        f"{len(texts)} completion(s)") from None
    if isinstance(out, np.ndarray):
        out = out.tolist()
    if not isinstance(out, (list, tuple)) or len(out) != len(texts):
        got = f"{len(out)} values" if isinstance(out, (list, tuple)) else repr(out)[:60]
        raise UserError(f"{ref}: returned {got} for {len(texts)} completions; allowed: a list of one number per "
                        "completion")
    return [_number(v, ref) for v in out]


def grades(values: Sequence[float | None]) -> list[Grade]:
    """A grading function's values as grades: right where 1 or more, no answer where None, the value as its share."""
    return [Grade(v is not None and v >= 1, v is not None, None if v is None else f"{v:g}", None, v) for v in values]


def grade_items(ref: str, items: pd.DataFrame, prompts: Sequence[Any], texts: Sequence[Sequence[str]]
                ) -> list[list[Grade]]:
    """Every item's completions (``texts[i]`` for row ``i`` of ``items``, prompted with ``prompts[i]``) graded by
    the function ``ref``, in one call: what scoring, verification and evaluation do."""
    fn = load(ref)
    counts = [len(t) for t in texts]
    repeat = np.repeat(np.arange(len(items)), counts)
    cols = {c: [items[c].iloc[i] for i in repeat] for c in columns_of(items)}
    flat = [t for ts in texts for t in ts]
    values = call(fn, ref, flat, [prompts[i] for i in repeat], cols) if flat else []
    out, start = [], 0
    for n in counts:
        out.append(grades(values[start:start + n]))
        start += n
    return out


def trl_function(ref: str, columns: Sequence[str], as_grades: bool = False) -> Callable:
    """A TRL reward function calling ``ref`` with the completions' text, the prompts and ``columns`` (the training
    set's data columns); with ``as_grades``, a function returning its grades (the ``grades`` of
    :func:`grpo_budget.generation.grading.make_reward_function`) instead of its values."""
    fn = load(ref)

    def values(completions=None, prompts=None, **kwargs) -> list[float | None]:
        n = len(completions)
        return call(fn, ref, completions, prompts if prompts is not None else [None] * n,
                    {c: kwargs[c] for c in columns if c in kwargs})

    if as_grades:
        return lambda completions, answer=None, **kwargs: grades(values(completions, answer=answer, **kwargs))

    def reward(completions=None, **kwargs) -> list[float | None]:
        return values(completions, **kwargs)

    reward.__name__ = reward.__qualname__ = short(ref)  # TRL logs rewards/<name>/mean
    return reward


def refs(dataset: dict, rewards: dict | None = None) -> list[str]:
    """The functions a job of this dataset runs: its ``grading.function`` and those of ``training.rewards``."""
    own = (dataset.get("grading") or {}).get("function")
    return ([own] if own else []) + [n for n in (rewards or {}) if is_ref(n)]


def fingerprinted(dataset: dict, rewards: dict | None) -> dict:
    """``dataset`` with the content digests of its functions' files in its grading (only where it uses any), so a
    training run resumes only checkpoints trained by the same code."""
    files = {r: file_of(r) for r in refs(dataset, rewards)}
    digests = {r: hashlib.sha256(Path(f).read_bytes()).hexdigest()[:16] for r, f in files.items() if f and
               Path(f).is_file()}
    if not digests:
        return dataset
    return {**dataset, "grading": {**(dataset.get("grading") or {}), "code": digests}}


def check(ref: str, rows: pd.DataFrame | None, prompts: Sequence[Any] | None = None) -> None:
    """Before any job: ``ref`` imports, takes the keywords it will get, and returns numbers on a few real ``rows``
    (completions: the gold answer boxed and stated, and a wrong number, as a model would write them)."""
    fn = load(ref)
    if rows is None:
        check_signature(fn, ref, [])
        return
    columns = columns_of(rows)
    check_signature(fn, ref, columns)
    golds = [_shown(a) for a in rows["answer"]]
    # the gold answer boxed and stated, and a wrong number, as a model might write them
    completions = [c for g in golds for c in (f"\\boxed{{{g}}}", f"The answer is {g}.", "I think it is 1.")]
    repeat = np.repeat(np.arange(len(rows)), 3)
    given = list(prompts) if prompts is not None else list(rows["prompt"])
    call(fn, ref, completions, [given[i] for i in repeat], {c: [rows[c].iloc[i] for i in repeat] for c in columns})


def _shown(gold: Any) -> str:
    """A gold answer as a completion states it (a choice's label, not its JSON)."""
    text = "" if cell(gold) is None else str(gold)
    if text.startswith('{"label"'):
        return str(json.loads(text)["label"])
    return text

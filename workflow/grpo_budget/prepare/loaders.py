""":func:`load_benchmark`: one real benchmark as pool and test frames in the project's columns.

Each benchmark is read with ``datasets.load_dataset``, either from a Hugging Face
hub id or from local files (``data_files`` + ``format``), and mapped onto the
project's columns through a field mapping, so any copy of a data set works once
its column names are given in the config.

``load_benchmark(name, spec, seed)`` returns ``{"pool": frame, "test": frame}``
(or only one of them).  Every frame has the columns

``id``           stable across runs (derived from the copy's id column or a hash
                 of the question)
``prompt``       the question text only (instructions / chat template are added
                 elsewhere)
``answer``       the gold answer, normalised
``answer_type``  ``"number"``, ``"option"`` or ``"math"`` (see :data:`grpo_budget.generation.grading.ANSWER_TYPES`)
``solution``     the reference solution (BBH: the target written as a worked
                 completion; AIME: None unless the copy has solutions)

plus difficulty metadata: gsm8k ``n_steps``; math ``level`` (1-5, missing for
"Level ?"), ``type`` and ``numeric``; bbh ``n_objects`` (and ``n_swaps``).

A question a copy repeats (the same text once case, Unicode form and spacing are
ignored) is kept once, with a warning; one repeated with different gold answers,
or an id given to different questions, is a ``UserError`` naming the files.

The registry :data:`grpo_budget.prepare.benchmarks.BENCHMARKS` is the one place a benchmark's name exists: its
loader, answer type, default instruction, difficulty metadata column and default ``spec``. ``spec`` keys (all
optional):

``hub_id``, ``hub_config`` (str or list; BBH: a format string with ``{word}``
and ``{n}``), ``hub_split`` (BBH), ``data_files`` (str, list, or dict
split -> files; a directory stands for the data files in it), ``format``
(json/jsonl/parquet/csv; inferred from the file names), ``field`` (the JSON key
holding the rows; BBH's ``.json`` files use ``"examples"``), ``fields``
(mapping of ``question/solution/answer/level/type/id`` to the copy's column, or to a list of candidate
columns, the first present wins: the defaults list the names hub copies use),
``splits`` (role -> source split, roles ``pool`` and ``test``), ``objects``
(BBH: among 3, 5, 7), ``test_fraction`` / ``pool_size`` / ``test_size`` (BBH:
seeded split of each task's items), ``max_items`` (seeded cap per frame),
``cache_dir``, ``drop_ungradable`` (drop items without a gold answer; default
True), ``max_ungradable`` (the share of a split that may lack one before prepare refuses) and ``max_prompt_chars``
(the longest question accepted); the last two default to the config schema's values.

Reading the files or the hub is in :mod:`grpo_budget.prepare.files`, the per-benchmark row conversion in
:mod:`grpo_budget.prepare.rows`.
"""

from __future__ import annotations

import copy
import logging

import numpy as np
import pandas as pd

from grpo_budget.errors import UserError
from grpo_budget.config.schema import defaults
from grpo_budget.prepare.benchmarks import BENCHMARKS, gold_source, origin
from grpo_budget.prepare.rows import short_hash, excerpt

log = logging.getLogger(__name__)

COLUMNS = ["id", "prompt", "answer", "answer_type", "solution"]


def benchmark_spec(name: str, spec: dict | None) -> dict:
    """The benchmark's default spec updated by ``spec``, and the config schema's defaults of the keys it has."""
    if name not in BENCHMARKS:
        raise UserError(f"unknown benchmark {name!r}; allowed: {', '.join(BENCHMARKS)}")
    merged = copy.deepcopy(BENCHMARKS[name].spec)
    spec = {**defaults(("datasets", "*", "spec")), **(spec or {})}
    fields = dict(merged.get("fields", {}))
    fields.update(spec.pop("fields", None) or {})
    merged.update({k: v for k, v in spec.items() if v is not None})
    merged["fields"] = fields
    merged["_default_splits"] = "splits" not in spec
    if spec.get("data_files") is not None and "hub_id" not in spec:
        merged.pop("hub_id", None)
    return merged


def _cap(frame: pd.DataFrame, max_items: int | None, seed: int, salt: str) -> pd.DataFrame:
    if max_items is None or len(frame) <= int(max_items):
        return frame.reset_index(drop=True)
    rng = np.random.default_rng([int(seed), int(short_hash(salt, 8), 16)])
    keep = np.sort(rng.choice(len(frame), size=int(max_items), replace=False))
    return frame.iloc[keep].reset_index(drop=True)


def _drop_ungradable(frame: pd.DataFrame, name: str, role: str, spec: dict) -> pd.DataFrame:
    """``frame`` without its rows that lack a gold answer (kept, with a warning, under ``drop_ungradable: false``).
    More of them than ``spec.max_ungradable`` of the split, or all, is a :class:`UserError` naming the file, the
    field and the form expected: a format mismatch would otherwise shrink or empty the split silently."""
    bad = frame["answer"].isna() | (frame["answer"].astype(str).str.strip() == "")
    n, limit = int(bad.sum()), float(spec["max_ungradable"])
    if not n:
        return frame
    where = f"{name} {role} ({origin(spec, (spec.get('splits') or {}).get(role))})"
    drop = bool(spec.get("drop_ungradable", True))
    because = (f"no gold answer could be parsed from {gold_source(name, spec)}, e.g. for "
               f"{excerpt(frame.loc[bad, 'prompt'].iloc[0])!r}")
    if n == len(frame):
        raise UserError(f"{where}: all {n} rows {'were dropped' if drop else 'are ungradable'} because {because}; fix "
                        "the data, or map the field that holds the answers with the dataset's spec: {fields: {...}}")
    if n > limit * len(frame):
        raise UserError(f"{where}: {n} of {len(frame)} rows ({n / len(frame):.1%}, above spec.max_ungradable "
                        f"{limit:g}) {'would be dropped' if drop else 'are ungradable'} because {because}; fix those "
                        "rows, or raise the dataset's spec.max_ungradable")
    ids = frame.loc[bad, "id"].tolist()
    if drop:
        log.warning("%s: dropping %d item(s) without a gold answer: %s", where, n, ids[:10])
        return frame.loc[~bad].reset_index(drop=True)
    log.warning("%s: %d item(s) have no gold answer: %s", where, n, ids[:10])
    return frame


def load_benchmark(name: str, spec: dict | None, seed: int, unlabeled_pool: bool = False
                   ) -> dict[str, pd.DataFrame]:
    """Load benchmark ``name`` as ``{"pool": frame, "test": frame}`` (either may be absent). ``unlabeled_pool``:
    the pool's items are kept without gold answers (the dataset's ``answers:`` file supplies the bought ones)."""
    spec = benchmark_spec(name, spec)
    out = BENCHMARKS[name].load(name, spec, seed)
    result = {}
    for role, frame in out.items():
        if not (unlabeled_pool and role == "pool"):
            frame = _drop_ungradable(frame, name, role, spec)
        frame = _cap(frame, spec.get("max_items"), seed, f"{name}/{role}")
        result[role] = frame.reset_index(drop=True)
    return result

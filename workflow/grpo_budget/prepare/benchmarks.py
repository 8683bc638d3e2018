"""The registry of real benchmarks (:data:`BENCHMARKS`): each one's loader, answer type, instruction,
difficulty column, where its gold answers come from, and default spec."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from grpo_budget.errors import UserError
from grpo_budget.prepare import coderows
from grpo_budget.prepare.files import expand_files, load_hub, load_local, load_source
from grpo_budget.prepare.rows import (aime_rows, arc_rows, bbh_rows, drop_repeats, gsm8k_rows, math_rows,
                                      refuse_long_prompts, refuse_repeated_ids)

_BOXED = "Put your final answer within \\boxed{}."
_CODE = "Write the Python function in one ```python code block."

MATH_SUBJECTS = (
    "algebra",
    "counting_and_probability",
    "geometry",
    "intermediate_algebra",
    "number_theory",
    "prealgebra",
    "precalculus",
)

_NUMBER_WORDS = {3: "three", 4: "four", 5: "five", 6: "six", 7: "seven"}


def _assign_roles(name: str, spec: dict, source: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    splits = dict(spec.get("splits") or {})
    if spec.get("_default_splits") and source and set(source) <= {"pool", "test"}:
        return dict(source)  # data_files: {pool: ..., test: ...}: the keys are the roles
    out: dict[str, pd.DataFrame] = {}
    for role, split in splits.items():
        if role not in ("pool", "test"):
            raise UserError(f"spec.splits has role {role!r}; allowed roles: pool, test")
        if split in source:
            out[role] = source[split]
    if not out and spec.get("_default_splits") and len(splits) == 1 and len(source) == 1:
        # an evaluation-only benchmark (aime2025) read from local files without split names
        (role,) = splits
        out[role] = next(iter(source.values()))
    if not out:
        raise UserError(f"{name} ({origin(spec)}): none of the splits {splits} is in the data (splits found: "
                        f"{', '.join(sorted(source))}); allowed: spec.splits naming them, e.g. {{pool: train, test: test}}")
    return out


def _bbh_sizes(spec: dict, n_items: int, n_objects: int) -> tuple[int, int]:
    def pick(key: str) -> int | None:
        v = spec.get(key)
        if isinstance(v, dict):
            v = v.get(n_objects, v.get(str(n_objects)))
        return None if v is None else int(v)

    test_size, pool_size = pick("test_size"), pick("pool_size")
    if test_size is None:
        if pool_size is not None:
            test_size = n_items - pool_size
        else:
            frac = float(spec.get("test_fraction", 0.5))
            if not 0.0 <= frac <= 1.0:
                raise ValueError(f"test_fraction must be in [0, 1], got {frac}")
            test_size = int(round(n_items * frac))
    test_size = max(0, min(test_size, n_items))
    if pool_size is None:
        pool_size = n_items - test_size
    if pool_size + test_size > n_items:
        raise ValueError(
            f"bbh {n_objects} objects: pool_size {pool_size} + test_size {test_size} > {n_items} items"
        )
    return pool_size, test_size


def _load_bbh(spec: dict, seed: int) -> dict[str, pd.DataFrame]:
    objects = [int(n) for n in (spec.get("objects") or [3, 5, 7])]
    for n in objects:
        if n not in _NUMBER_WORDS:
            raise ValueError(f"bbh objects must be among {sorted(_NUMBER_WORDS)}, got {n}")
    frames: list[pd.DataFrame] = []
    fields = spec["fields"]
    if spec.get("data_files") is not None:
        files = spec["data_files"]
        files = list(files.values()) if isinstance(files, dict) else files
        flat: list[str] = []
        for f in ([files] if isinstance(files, (str, Path)) else files):
            flat.extend(expand_files(f))
        for f in flat:
            src = load_local(f, spec.get("format"), spec.get("field"), spec.get("cache_dir"))
            for part in src.values():
                frames.append(refuse_long_prompts(bbh_rows(part, fields), spec["max_prompt_chars"], f))
    else:
        configs = spec.get("hub_config")
        for n in objects:
            cfg = configs.format(word=_NUMBER_WORDS[n], n=n) if isinstance(configs, str) else configs
            src = load_hub(spec["hub_id"], cfg, spec.get("hub_split"), spec.get("cache_dir"))
            for part in src.values():
                frames.append(refuse_long_prompts(bbh_rows(part, fields), spec["max_prompt_chars"],
                                                  f"hub {spec['hub_id']} ({cfg})"))
    if not frames:
        raise ValueError("bbh: no data loaded")
    every = pd.concat(frames, ignore_index=True)
    every = every[every["n_objects"].isin(objects)].reset_index(drop=True)
    # Before the split: a question in two files must not land in both the pool and the test set.
    where = f"bbh_shuffled_objects ({origin(spec)})"
    every = drop_repeats(every, where)
    refuse_repeated_ids(every, where)
    pools, tests = [], []
    for n in objects:
        part = every[every["n_objects"] == n].reset_index(drop=True)
        if part.empty:
            continue
        pool_size, test_size = _bbh_sizes(spec, len(part), n)
        perm = np.random.default_rng([int(seed), n]).permutation(len(part))
        test_idx = np.sort(perm[:test_size])
        pool_idx = np.sort(perm[test_size : test_size + pool_size])
        tests.append(part.iloc[test_idx])
        pools.append(part.iloc[pool_idx])
    out = {}
    if pools:
        pool = pd.concat(pools, ignore_index=True)
        if len(pool):
            out["pool"] = pool
    if tests:
        test = pd.concat(tests, ignore_index=True)
        if len(test):
            out["test"] = test
    if not out:
        raise UserError(f"{origin(spec)}: none of its rows is a tracking shuffled objects item with "
                        f"{', '.join(map(str, objects))} options listed as '(A) ...' lines, which "
                        "bbh_shuffled_objects reads; allowed: BIG-Bench Hard's files, or for your own multiple choice "
                        "source: files with answer_type: choice (docs/your-own-data.md)")
    return out


# --------------------------------------------------------------------------- registry


def _by_split(build: Callable[[pd.DataFrame, dict], pd.DataFrame],
              splits: Callable[[dict, dict], dict] | None = None) -> Callable[[str, dict, int], dict]:
    """A loader for a benchmark whose copies come with named splits: each role's frame through ``build``
    (``splits``: how a copy's frames become its named splits, e.g. MBPP's one file cut by task id)."""

    def load(name: str, spec: dict, seed: int) -> dict[str, pd.DataFrame]:
        out = {}
        source = load_source(spec)
        source = splits(source, spec["fields"]) if splits else source
        for role, frame in _assign_roles(name, spec, source).items():
            where = f"{name} {role} ({origin(spec, (spec.get('splits') or {}).get(role))})"
            rows = refuse_long_prompts(build(frame.reset_index(drop=True), spec["fields"]), spec["max_prompt_chars"],
                                       where)
            out[role] = drop_repeats(rows, where)
            refuse_repeated_ids(out[role], where)
        return out

    load.rows = build  # the row conversion alone: validation runs it on a few rows of the files
    return load


def origin(spec: dict, split: str | None = None) -> str:
    """Where a benchmark's rows come from, for messages: its data files (the split's, where given by split), else
    its hub id."""
    files = spec.get("data_files")
    if files is None:
        return f"hub {spec.get('hub_id')}"
    if isinstance(files, dict):
        files = files[split] if split in files else list(files.values())
    parts = files if isinstance(files, (list, tuple)) else [files]
    return ", ".join(str(f) for part in parts for f in (part if isinstance(part, (list, tuple)) else [part]))


@dataclass(frozen=True)
class Benchmark:
    """What the system knows about a benchmark, by name (a dataset's ``benchmark:``)."""

    load: Callable[[str, dict, int], dict[str, pd.DataFrame]]  # (name, merged spec, seed) -> {role: frame}
    answer_type: str  # grading.ANSWER_TYPES
    instruction: str  # appended to each question when the config gives none
    difficulty: str | None  # metadata column for the difficulty-stratified analysis
    gold: tuple[str, str]  # (the spec.fields key its gold answers are parsed from, the form expected), for messages
    spec: dict = field(default_factory=dict)  # default loading spec: hub id and configs, field names, splits


def gold_source(name: str, spec: dict) -> str:
    """Where benchmark ``name``'s gold answers are parsed from (the copy's column, as the merged ``spec`` maps it)
    and in what form, for a message about rows without one."""
    key, form = BENCHMARKS[name].gold
    fields = spec.get("fields") or {}
    if key != "answer" and fields.get("answer") and fields["answer"] != fields.get(key):
        key, form = "answer", "a non-empty answer"  # a mapped answer column is read instead of the solution
    columns = fields.get(key)
    named = " or ".join(map(repr, columns if isinstance(columns, (list, tuple)) else [columns]))
    return f"field {named} (spec.fields.{key}; expected {form})"


BENCHMARKS: dict[str, Benchmark] = {
    "gsm8k": Benchmark(
        load=_by_split(gsm8k_rows), answer_type="number", instruction=_BOXED, difficulty="n_steps",
        gold=("solution", "a worked solution ending in '#### <number>'"),
        spec={"hub_id": "openai/gsm8k", "hub_config": "main",
              "fields": {"question": ["question", "problem"], "solution": "answer"},
              "splits": {"pool": "train", "test": "test"}},
    ),
    "bbh_shuffled_objects": Benchmark(
        load=lambda name, spec, seed: _load_bbh(spec, seed), answer_type="option",
        instruction="Answer concisely, think step by step, then put your final answer within \\boxed{(X)}.",
        difficulty="n_objects",
        gold=("answer", "an option such as (A)"),
        spec={"hub_id": "lukaemon/bbh", "hub_config": "tracking_shuffled_objects_{word}_objects", "hub_split": "test",
              "fields": {"question": ["input", "question"], "answer": ["target", "answer"]}, "objects": [3, 5, 7],
              "test_fraction": 0.5},
    ),
    "math": Benchmark(
        load=_by_split(math_rows), answer_type="math", instruction=_BOXED, difficulty="level",
        gold=("solution", "a solution with its final answer in the last \\boxed{...}"),
        spec={"hub_id": "EleutherAI/hendrycks_math", "hub_config": list(MATH_SUBJECTS),
              "fields": {"question": ["problem", "question"], "solution": "solution", "level": "level",
                         "type": "type", "id": "unique_id"},
              "splits": {"pool": "train", "test": "test"}},
    ),
    "aime2025": Benchmark(
        load=_by_split(aime_rows), answer_type="number", instruction=_BOXED, difficulty=None,
        gold=("answer", "a number"),
        spec={"hub_id": "opencompass/AIME2025", "hub_config": ["AIME2025-I", "AIME2025-II"],
              "fields": {"question": ["question", "problem"], "answer": "answer", "solution": "solution", "id": "id"},
              "splits": {"test": "test"}},
    ),
    "mbpp": Benchmark(
        load=_by_split(coderows.mbpp_rows, coderows.mbpp_splits), answer_type="code", instruction=_CODE,
        difficulty="n_tests", gold=("tests", "a list of assert statements"),
        spec={"hub_id": "google-research-datasets/mbpp", "hub_config": "full",
              "fields": {"question": ["text", "prompt"], "solution": "code", "tests": "test_list",
                         "setup": ["test_setup_code", "test_imports"], "id": "task_id"},
              "splits": {"pool": "train", "test": "test"}},
    ),
    "humaneval": Benchmark(
        load=_by_split(coderows.humaneval_rows), answer_type="code", instruction=_CODE, difficulty="n_lines",
        gold=("tests", "a check(candidate) function"),
        spec={"hub_id": "openai/openai_humaneval", "hub_config": None,
              "fields": {"question": "prompt", "solution": "canonical_solution", "tests": "test",
                         "entry_point": "entry_point", "id": "task_id"},
              "splits": {"test": "test"}},
    ),
    "arc": Benchmark(
        load=_by_split(arc_rows), answer_type="choice",
        instruction="Think step by step, then put the label of your answer within \\boxed{}, e.g. \\boxed{(A)}.",
        difficulty=None, gold=("answer", "a choice label such as B or 3"),
        spec={"hub_id": "allenai/ai2_arc", "hub_config": ["ARC-Challenge", "ARC-Easy"],
              "fields": {"question": "question", "answer": "answerKey", "choices": "choices", "id": "id"},
              "splits": {"pool": "train", "test": "test"}},
    ),
}

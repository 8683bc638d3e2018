"""Loaders for the real benchmarks.

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
``answer_type``  ``"number"``, ``"option"`` or ``"math"`` (see grading.py)
``solution``     the reference solution (BBH: the target written as a worked
                 completion; AIME: None unless the copy has solutions)

plus difficulty metadata: gsm8k ``n_steps``; math ``level`` (1-5, missing for
"Level ?"), ``type`` and ``numeric``; bbh ``n_objects`` (and ``n_swaps``).

The registry :data:`BENCHMARKS` is the one place a benchmark's name exists: its loader, answer type, default
instruction, difficulty metadata column and default ``spec``. ``spec`` keys (all optional):

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
True).
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from grpo_budget.errors import UserError
from grpo_budget.generation.grading import last_boxed

log = logging.getLogger(__name__)

_BOXED = "Put your final answer within \\boxed{}."

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
_FORMATS = {"json": "json", "jsonl": "json", "parquet": "parquet", "csv": "csv", "arrow": "arrow"}
_PLAIN_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")

COLUMNS = ["id", "prompt", "answer", "answer_type", "solution"]


# --------------------------------------------------------------------------- helpers


def _spec(name: str, spec: dict | None) -> dict:
    if name not in BENCHMARKS:
        raise UserError(f"unknown benchmark {name!r}; allowed: {', '.join(BENCHMARKS)}")
    merged = copy.deepcopy(BENCHMARKS[name].spec)
    spec = dict(spec or {})
    fields = dict(merged.get("fields", {}))
    fields.update(spec.pop("fields", None) or {})
    merged.update({k: v for k, v in spec.items() if v is not None})
    merged["fields"] = fields
    merged["_default_splits"] = "splits" not in spec
    if spec.get("data_files") is not None and "hub_id" not in spec:
        merged.pop("hub_id", None)
    return merged


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


def _expand(files: Any) -> list[str]:
    if isinstance(files, (str, Path)):
        files = [files]
    out: list[str] = []
    for f in files:
        p = Path(f)
        if p.is_dir():
            found = sorted(
                str(q) for q in p.iterdir() if q.is_file() and q.suffix.lstrip(".") in _FORMATS
            )
            if not found:
                raise FileNotFoundError(f"no data files (json/jsonl/parquet/csv) in {p}")
            out.extend(found)
        else:
            if "*" not in str(f) and not p.exists():
                raise FileNotFoundError(f"data file not found: {f}")
            out.append(str(f))
    return out


def _infer_format(files: list[str], fmt: str | None) -> str:
    if fmt:
        if fmt not in _FORMATS:
            raise ValueError(f"unknown data format {fmt!r}; expected one of {sorted(_FORMATS)}")
        return _FORMATS[fmt]
    suffixes = {Path(f).suffix.lstrip(".").lower() for f in files}
    formats = {_FORMATS.get(s) for s in suffixes}
    if len(formats) != 1 or None in formats:
        raise ValueError(f"cannot infer the format of {files}; give spec['format']")
    return formats.pop()


def _json_field(files: list[str], fmt: str, field: str | None) -> str | None:
    """BBH's .json files hold the rows under "examples"; JSON Lines hold rows directly."""
    if field is not None or fmt != "json":
        return field
    first = files[0]
    if first.endswith(".jsonl") or "*" in first:
        return None
    with open(first, "rb") as fh:
        head = fh.read(4096).lstrip()
    if head.startswith(b"{") and b'"examples"' in head[:4096]:
        return "examples"
    return None


def _load_local(data_files: Any, fmt: str | None, field: str | None, cache_dir: str | None) -> dict[str, pd.DataFrame]:
    import datasets

    if isinstance(data_files, dict):
        expanded: Any = {str(k): _expand(v) for k, v in data_files.items()}
        all_files = [f for v in expanded.values() for f in v]
    else:
        expanded = _expand(data_files)
        all_files = expanded
    fmt = _infer_format(all_files, fmt)
    kwargs: dict[str, Any] = {"data_files": expanded}
    jf = _json_field(all_files, fmt, field)
    if jf:
        kwargs["field"] = jf
    if cache_dir:
        kwargs["cache_dir"] = cache_dir
    try:
        dd = datasets.load_dataset(fmt, **kwargs)
    except Exception as e:  # noqa: BLE001 - the library's parse errors name neither file nor line
        bad = _first_bad_json_line(all_files) if fmt == "json" and not jf else None
        if bad:
            raise UserError(bad) from e
        raise
    return {split: dd[split].to_pandas() for split in dd}


def _first_bad_json_line(files: list[str]) -> str | None:
    """``FILE:LINE: what is wrong`` for the first line of a JSON Lines file that is not a JSON object."""
    for f in files:
        if "*" in f:
            continue
        with open(f, encoding="utf-8", errors="replace") as fh:
            for n, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as e:
                    return f"{f}:{n}: not valid JSON ({e.msg} at column {e.colno})"
                if not isinstance(obj, dict):
                    return f"{f}:{n}: each line must be a JSON object, got {type(obj).__name__}"
    return None


def _load_hub(hub_id: str, configs: Any, split: str | None, cache_dir: str | None) -> dict[str, pd.DataFrame]:
    import datasets

    if configs is None or isinstance(configs, str):
        configs = [configs]
    parts: dict[str, list[pd.DataFrame]] = {}
    for cfg in configs:
        kwargs: dict[str, Any] = {}
        if cache_dir:
            kwargs["cache_dir"] = cache_dir
        try:
            dd = datasets.load_dataset(hub_id, cfg, **kwargs)
        except Exception as e:  # noqa: BLE001 - no network, a wrong id or config: one line, and the way out
            reason = " ".join(str(e).split())[:300]
            raise UserError(f"cannot load {hub_id!r} (config {cfg!r}) from the Hugging Face hub ({type(e).__name__}: "
                            f"{reason}); give local files with the dataset's spec.data_files "
                            "(check-grader: --data-files)") from e
        for s in dd:
            if split is not None and s != split:
                continue
            frame = dd[s].to_pandas()
            frame["_config"] = cfg
            parts.setdefault(s, []).append(frame)
    return {s: pd.concat(v, ignore_index=True) for s, v in parts.items()}


def _load_source(spec: dict) -> dict[str, pd.DataFrame]:
    if spec.get("data_files") is not None:
        return _load_local(spec["data_files"], spec.get("format"), spec.get("field"), spec.get("cache_dir"))
    if not spec.get("hub_id"):
        raise ValueError("spec needs either data_files or hub_id")
    return _load_hub(spec["hub_id"], spec.get("hub_config"), spec.get("hub_split"), spec.get("cache_dir"))


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


def _assign_roles(name: str, spec: dict, source: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    splits = dict(spec.get("splits") or {})
    out: dict[str, pd.DataFrame] = {}
    for role, split in splits.items():
        if role not in ("pool", "test"):
            raise ValueError(f"spec['splits'] roles must be 'pool' or 'test', got {role!r}")
        if split in source:
            out[role] = source[split]
    if not out and spec.get("_default_splits") and len(splits) == 1 and len(source) == 1:
        # an evaluation-only benchmark (aime2025) read from local files without split names
        (role,) = splits
        out[role] = next(iter(source.values()))
    if not out:
        raise ValueError(
            f"{name}: none of the splits {splits} is in the data (splits found: {sorted(source)}); "
            "set spec['splits'], e.g. {'pool': 'train'}"
        )
    return out


def _cap(frame: pd.DataFrame, max_items: int | None, seed: int, salt: str) -> pd.DataFrame:
    if max_items is None or len(frame) <= int(max_items):
        return frame.reset_index(drop=True)
    rng = np.random.default_rng([int(seed), int(_hash(salt, 8), 16)])
    keep = np.sort(rng.choice(len(frame), size=int(max_items), replace=False))
    return frame.iloc[keep].reset_index(drop=True)


def _drop_ungradable(frame: pd.DataFrame, name: str, role: str, drop: bool) -> pd.DataFrame:
    bad = frame["answer"].isna() | (frame["answer"].astype(str).str.strip() == "")
    if bad.any():
        ids = frame.loc[bad, "id"].tolist()
        if drop:
            log.warning("%s/%s: dropping %d item(s) without a gold answer: %s", name, role, len(ids), ids[:10])
            frame = frame.loc[~bad].reset_index(drop=True)
        else:
            log.warning("%s/%s: %d item(s) have no gold answer: %s", name, role, len(ids), ids[:10])
    return frame


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
            flat.extend(_expand(f))
        for f in flat:
            src = _load_local(f, spec.get("format"), spec.get("field"), spec.get("cache_dir"))
            for part in src.values():
                frames.append(_bbh_frame(part, fields))
    else:
        configs = spec.get("hub_config")
        for n in objects:
            cfg = configs.format(word=_NUMBER_WORDS[n], n=n) if isinstance(configs, str) else configs
            src = _load_hub(spec["hub_id"], cfg, spec.get("hub_split"), spec.get("cache_dir"))
            for part in src.values():
                frames.append(_bbh_frame(part, fields))
    if not frames:
        raise ValueError("bbh: no data loaded")
    every = pd.concat(frames, ignore_index=True)
    every = every[every["n_objects"].isin(objects)].reset_index(drop=True)
    every["id"] = _unique(every["id"])
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
        raise ValueError(f"bbh: no items with {objects} objects in the data")
    return out


# --------------------------------------------------------------------------- registry


def _by_split(build: Callable[[pd.DataFrame, dict], pd.DataFrame]) -> Callable[[str, dict, int], dict]:
    """A loader for a benchmark whose copies come with named splits: each role's frame through ``build``."""

    def load(name: str, spec: dict, seed: int) -> dict[str, pd.DataFrame]:
        roles = _assign_roles(name, spec, _load_source(spec))
        return {role: build(frame.reset_index(drop=True), spec["fields"]) for role, frame in roles.items()}

    return load


@dataclass(frozen=True)
class Benchmark:
    """What the system knows about a benchmark, by name (a dataset's ``benchmark:``)."""

    load: Callable[[str, dict, int], dict[str, pd.DataFrame]]  # (name, merged spec, seed) -> {role: frame}
    answer_type: str  # grading.ANSWER_TYPES
    instruction: str  # appended to each question when the config gives none
    difficulty: str | None  # metadata column for the difficulty-stratified analysis
    spec: dict = field(default_factory=dict)  # default loading spec: hub id and configs, field names, splits


BENCHMARKS: dict[str, Benchmark] = {
    "gsm8k": Benchmark(
        load=_by_split(_gsm8k), answer_type="number", instruction=_BOXED, difficulty="n_steps",
        spec={"hub_id": "openai/gsm8k", "hub_config": "main",
              "fields": {"question": ["question", "problem"], "solution": "answer"},
              "splits": {"pool": "train", "test": "test"}},
    ),
    "bbh_shuffled_objects": Benchmark(
        load=lambda name, spec, seed: _load_bbh(spec, seed), answer_type="option",
        instruction="Answer concisely, think step by step, then put your final answer within \\boxed{(X)}.",
        difficulty="n_objects",
        spec={"hub_id": "lukaemon/bbh", "hub_config": "tracking_shuffled_objects_{word}_objects", "hub_split": "test",
              "fields": {"question": ["input", "question"], "answer": ["target", "answer"]}, "objects": [3, 5, 7],
              "test_fraction": 0.5},
    ),
    "math": Benchmark(
        load=_by_split(_math), answer_type="math", instruction=_BOXED, difficulty="level",
        spec={"hub_id": "EleutherAI/hendrycks_math", "hub_config": list(MATH_SUBJECTS),
              "fields": {"question": ["problem", "question"], "solution": "solution", "level": "level",
                         "type": "type", "id": "unique_id"},
              "splits": {"pool": "train", "test": "test"}},
    ),
    "aime2025": Benchmark(
        load=_by_split(_aime), answer_type="number", instruction=_BOXED, difficulty=None,
        spec={"hub_id": "opencompass/AIME2025", "hub_config": ["AIME2025-I", "AIME2025-II"],
              "fields": {"question": ["question", "problem"], "answer": "answer", "solution": "solution", "id": "id"},
              "splits": {"test": "test"}},
    ),
}


def load_benchmark(name: str, spec: dict | None, seed: int, unlabeled_pool: bool = False
                   ) -> dict[str, pd.DataFrame]:
    """Load benchmark ``name`` as ``{"pool": frame, "test": frame}`` (either may be absent). ``unlabeled_pool``:
    the pool's items are kept without gold answers (the dataset's ``answers:`` file supplies the bought ones)."""
    spec = _spec(name, spec)
    out = BENCHMARKS[name].load(name, spec, seed)
    drop = bool(spec.get("drop_ungradable", True))
    result = {}
    for role, frame in out.items():
        if not (unlabeled_pool and role == "pool"):
            frame = _drop_ungradable(frame, name, role, drop)
        frame = _cap(frame, spec.get("max_items"), seed, f"{name}/{role}")
        result[role] = frame.reset_index(drop=True)
    return result

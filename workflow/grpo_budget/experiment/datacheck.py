"""Checks that read the user's data before any job: a few rows of every local data file of every dataset, read as
the prepare job reads them, so that ``validate-config`` and ``snakemake -n`` refuse what the prepare job would stop
on (or silently get wrong) in one line naming the file, the column and what is allowed: the pool and test roles,
the question and answer columns, the answer type and the choices; for a benchmark's copy, a mapped field that names
no column, a copy without the benchmark's layout, or gold answers the benchmark cannot read."""

from __future__ import annotations

import glob
import gzip
import json
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq

from grpo_budget.errors import UserError
from grpo_budget.config.schema import ConfigError
from grpo_budget.generation import custom_rewards
from grpo_budget.generation.grading import ANSWER_TYPES
from grpo_budget.prepare.benchmarks import BENCHMARKS, gold_source
from grpo_budget.prepare.files import FORMATS, folder_files, infer_format, json_field
from grpo_budget.prepare.loaders import benchmark_spec
from grpo_budget.prepare.rows import bbh_rows, excerpt
from grpo_budget.prepare.splits import build_builtin
from grpo_budget.prepare.userfiles import converted, gradable, roles, spec_of
from grpo_budget.prepare.userrows import FIELD_KEYS

HEAD = 5  # rows read from each data file
BBH = "bbh_shuffled_objects"
DOCS = "docs/your-own-data.md"


def files_entry(where: str, ds: dict) -> None:
    """What a ``source: files`` entry must say without reading anything: its answer type, where its rows are, and
    which columns hold the question and the answer."""
    if "answer_type" not in ds:
        raise ConfigError(f"config field '{where}.answer_type' is required for source: files; allowed: "
                          f"{', '.join(ANSWER_TYPES)} ({DOCS})")
    for key in ("generator", "benchmark", "params"):
        if key in ds:
            raise ConfigError(f"config field '{where}.{key}' is not read by source: files; allowed: spec (data_files, "
                              "fields, test_fraction, ...) and answer_type")
    spec = ds.get("spec") or {}
    if spec.get("data_files") is None and not spec.get("hub_id"):
        raise ConfigError(f"config field '{where}.spec.data_files' is required for source: files (or spec.hub_id for "
                          "a hub dataset); allowed: a file, a list of files, a folder, or {pool: FILE, test: FILE}")
    fields = spec.get("fields") or {}
    unknown = [k for k in fields if k not in FIELD_KEYS]
    if unknown:
        raise ConfigError(f"config field '{where}.spec.fields.{unknown[0]}' is not read by source: files; allowed: "
                          f"{', '.join(FIELD_KEYS)} (every other column passes through under its own name)")
    for key in ("question", "answer"):
        if not fields.get(key):
            raise ConfigError(f"config field '{where}.spec.fields.{key}' is required for source: files; allowed: the "
                              f"column that holds the {key}" + (" (or a template over columns, '{context} {question}')"
                                                                  if key == "question" else ""))
    if ds["answer_type"] == "choice" and not fields.get("choices"):
        raise ConfigError(f"config field '{where}.spec.fields.choices' is required by answer_type choice; allowed: a "
                          "column of options (a list, a {label: text} mapping, {label: [...], text: [...]}) or a list "
                          "of columns, one option each")


# ---------------------------------------------------------------------------------------------------------------
# Reading a few rows


def _expanded(files) -> list[str]:
    out: list[str] = []
    for f in [files] if isinstance(files, (str, Path)) else files:
        p = Path(f)
        out += folder_files(p) if p.is_dir() else sorted(glob.glob(str(f))) if "*" in str(f) else [str(f)]
    return out


def _head_of(path: str, fmt: str, field: str | None) -> pd.DataFrame:
    """The first :data:`HEAD` rows of one data file."""
    opener = gzip.open if path.endswith(".gz") else open
    if fmt == "parquet":
        batch = next(pq.ParquetFile(path).iter_batches(batch_size=HEAD), None)
        return batch.to_pandas() if batch is not None else pd.DataFrame()
    if fmt == "csv":
        return pd.read_csv(path, nrows=HEAD)
    if fmt == "json" and field is None:  # JSON lines, or a .json list of rows
        rows = []
        with opener(path, "rt", encoding="utf-8") as fh:
            first = fh.read(1 << 16).lstrip()
        if first.startswith("["):
            with opener(path, "rt", encoding="utf-8") as fh:
                data = json.load(fh)
            return pd.DataFrame(data[:HEAD] if isinstance(data, list) else [])
        with opener(path, "rt", encoding="utf-8") as fh:
            for n, line in enumerate(fh, start=1):
                if line.strip():
                    try:
                        rows.append(json.loads(line))
                    except ValueError as e:
                        raise UserError(f"{path}:{n}: not valid JSON ({e}); each line is one JSON object") from None
                if len(rows) >= HEAD:
                    break
        return pd.DataFrame(rows)
    if fmt == "json":
        with opener(path, "rt", encoding="utf-8") as fh:
            data = json.load(fh)
        return pd.DataFrame(data.get(field, [])[:HEAD] if isinstance(data, dict) else [])
    return pd.DataFrame()  # arrow: read by the job alone


def heads(spec: dict) -> dict[str, pd.DataFrame]:
    """The first rows of each split's local files, by split (as ``datasets`` names them: a mapping's keys, else
    ``train``); ``{}`` for a hub dataset."""
    files = spec.get("data_files")
    if files is None:
        return {}
    by_split = {str(k): _expanded(v) for k, v in files.items()} if isinstance(files, dict) else {"train": _expanded(files)}
    every = [f for v in by_split.values() for f in v]
    if not every:
        return {}
    try:
        fmt = infer_format(every, spec.get("format"))
    except ValueError:
        raise UserError(f"{', '.join(every)}: cannot tell the format from the file names; allowed: names ending in "
                        f"{', '.join('.' + s for s in FORMATS)} (or .gz of them), or spec.format") from None
    field = json_field(every, fmt, spec.get("field"))
    out = {}
    for split, paths in by_split.items():
        frames = []
        for path in paths:
            try:
                frames.append(_head_of(path, fmt, field))
            except (OSError, ValueError, UnicodeDecodeError) as e:
                if isinstance(e, UserError):
                    raise
                raise UserError(f"{path}: cannot be read as {fmt} ({' '.join(str(e).split())[:200]})") from None
        out[split] = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    return out


# ---------------------------------------------------------------------------------------------------------------
# The checks


def check(name: str, ds: dict) -> None:
    """Refuse, in one line naming the file and the column, a dataset whose local rows the prepare job would not
    read as meant. Hub datasets are checked by their job."""
    where = f"datasets.{name}"
    try:
        if ds["source"] == "files":
            _files(ds)
        elif ds["source"] == "benchmark":
            _benchmark(ds)
    except UserError as e:
        raise ConfigError(f"config field '{where}': {e}") from None


def _files(ds: dict) -> None:
    spec = spec_of(ds)
    found = heads(spec)
    if not found:
        return
    chosen = roles(found, spec, bool(ds.get("eval_only")), _files_named(spec))
    for role, split in chosen.items():
        if split is None:
            continue  # one set of rows, split by test_size or test_fraction: checked as the test role
        frame = found[split]
        where = _files_named(spec, split)
        if frame.empty:
            raise UserError(f"{where}: no rows; allowed: data files with at least one row")
        rows = converted(frame, ds, spec, where)
        if not (ds.get("answers") and (role == "pool" or chosen.get("pool", "") is None)):
            # a few rows: refused where most lack a gold answer (the job applies spec.max_ungradable to them all)
            gradable(rows, dict(spec, max_ungradable=0.5), ds["answer_type"], where)


def _files_named(spec: dict, split: str | None = None) -> str:
    files = spec.get("data_files")
    if isinstance(files, dict) and split in files:
        files = files[split]
    return ", ".join(map(str, files if isinstance(files, (list, tuple)) else
                         files.values() if isinstance(files, dict) else [files]))


def _benchmark(ds: dict) -> None:
    name = ds["benchmark"]
    given = (ds.get("spec") or {}).get("fields") or {}
    spec = benchmark_spec(name, ds.get("spec"))
    found = heads(spec)
    if not found:
        return
    for split, frame in found.items():
        where = _files_named(spec, split)
        for key, column in given.items():
            candidates = column if isinstance(column, list) else [column]
            if column is not None and not any(c in frame.columns for c in candidates):
                raise UserError(f"{where}: spec.fields.{key} names column {' or '.join(map(repr, candidates))}, which "
                                f"is not in the data; allowed: one of its columns ({', '.join(map(str, frame.columns))})")
    if name == BBH:
        _bbh(spec, found)
        return
    _roles(name, spec, found, bool(ds.get("eval_only")))
    build = getattr(BENCHMARKS[name].load, "rows", None)
    if build is None:
        return
    for split, frame in found.items():
        where = _files_named(spec, split)
        try:
            built = build(frame, spec["fields"])
        except UserError as e:
            raise UserError(f"{where}: {e}") from None
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as e:
            raise UserError(f"{where}: its rows do not have benchmark {name}'s layout ({type(e).__name__}: "
                            f"{excerpt(e, 80)}); allowed: a copy with the hub's columns, or for your own rows source: "
                            f"files ({DOCS})") from None
        missing = built["answer"].isna() | (built["answer"].astype(str).str.strip() == "")
        if missing.sum() * 2 > len(built) and not (ds.get("answers") and split == spec["splits"].get("pool")):
            raise UserError(f"{where}: {int(missing.sum())} of its first {len(built)} rows have no gold answer in "
                            f"{gold_source(name, spec)}, e.g. {excerpt(built['prompt'].iloc[int(missing.argmax())])!r}; "
                            "map the column that holds the answers (spec.fields.answer), or for your own rows use "
                            f"source: files ({DOCS})")


def _roles(name: str, spec: dict, found: dict, eval_only: bool) -> None:
    """A copy's splits against the roles the benchmark takes, as :func:`grpo_budget.prepare.benchmarks._assign_roles`
    finds them (mbpp cuts its one file by task id itself)."""
    if name == "mbpp" and len(found) == 1:
        return
    splits = dict(spec.get("splits") or {})
    if spec.get("_default_splits") and set(found) <= {"pool", "test"}:
        got = set(found)  # data_files: {pool: ..., test: ...}: the keys are the roles
    else:
        got = {r for r, s in splits.items() if s in found}
        if not got and spec.get("_default_splits") and len(splits) == 1 and len(found) == 1:
            got = set(splits)
    lacking = ([] if got else ["test"]) if eval_only else [r for r in ("pool", "test") if r not in got]
    if lacking:
        role = lacking[0]
        source = f"split {splits[role]!r}" if role in splits else "no split"
        raise UserError(f"{_files_named(spec)}: {'one split' if len(found) == 1 else 'splits ' + ', '.join(found)}, "
                        f"and benchmark {name} takes its {role} set from {source}; allowed: data_files: {{pool: FILE, "
                        "test: FILE}, spec.splits naming the splits there are, or source: files with "
                        f"spec.test_fraction to hold out a seeded test set of one file ({DOCS})")


def _bbh(spec: dict, found: dict) -> None:
    objects = [int(n) for n in (spec.get("objects") or [3, 5, 7])]
    for split, frame in found.items():
        try:
            built = bbh_rows(frame, spec["fields"])
        except UserError as e:
            raise UserError(f"{_files_named(spec, split)}: {e}") from None
        if not built["n_objects"].isin(objects).any():
            raise UserError(f"{_files_named(spec, split)}: none of its first {len(built)} rows is a tracking shuffled "
                            f"objects item with {', '.join(map(str, objects))} options listed as '(A) ...' lines, "
                            f"which {BBH} reads; allowed: BIG-Bench Hard's files, or for your own multiple choice "
                            f"source: files with answer_type: choice ({DOCS})")


# ---------------------------------------------------------------------------------------------------------------
# Your own functions, checked on a few real rows


def sample_rows(ds: dict) -> pd.DataFrame | None:
    """A few of a dataset's rows in the project's columns, as its jobs see them (None for a hub dataset)."""
    if ds["source"] == "builtin":
        return build_builtin({**ds, "pool_size": HEAD, "test_size": HEAD, "eval_only": True})["test"]
    spec = spec_of(ds) if ds["source"] == "files" else benchmark_spec(ds["benchmark"], ds.get("spec"))
    found = heads(spec)
    if not found:
        return None
    split, frame = next(iter(found.items()))
    if ds["source"] == "files":
        return converted(frame, ds, spec, _files_named(spec, split))
    build = bbh_rows if ds["benchmark"] == BBH else getattr(BENCHMARKS[ds["benchmark"]].load, "rows", None)
    return build(frame, spec["fields"]).dropna(subset=["answer"]) if build else None


def functions(cfg: dict) -> None:
    """Every grading and reward function of the config imports, takes the keywords it will be given, and returns
    numbers on a few rows of the datasets it grades (your own code runs here, as it will in the jobs)."""
    trainable = [n for n, d in cfg["datasets"].items() if not d.get("eval_only")]
    for name, ds in cfg["datasets"].items():
        ref = (ds.get("grading") or {}).get("function")
        if ref:
            try:
                custom_rewards.check(ref, sample_rows(ds))
            except UserError as e:
                raise ConfigError(f"config field 'datasets.{name}.grading.function': {e}") from None
    for ref in [r for r in cfg["training"]["rewards"] if custom_rewards.is_ref(r)]:
        for name in trainable:
            try:
                custom_rewards.check(ref, sample_rows(cfg["datasets"][name]))
            except UserError as e:
                raise ConfigError(f"config field 'training.rewards.{ref}' (on dataset {name}): {e}") from None

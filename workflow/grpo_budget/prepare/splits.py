"""Prepare stage: a dataset entry of the config becomes a pool and a test table in Parquet."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from grpo_budget.errors import UserError
from grpo_budget.io import read_parquet, write_parquet
from grpo_budget.prepare import framearith, shuffled_objects, userfiles
from grpo_budget.prepare.loaders import load_benchmark
from grpo_budget.prepare.rows import excerpt, normalized

SPLITS = ("pool", "test")


def _frame_arithmetic(ds: dict, seed: int, params: dict) -> dict[str, pd.DataFrame]:
    test = framearith.generate(ds["test_size"], seed * 2 + 1, **params)
    out = {"test": test}
    if not ds.get("eval_only"):
        out["pool"] = framearith.generate(ds["pool_size"], seed * 2, **params, exclude=test["prompt"])
    return out


def _shuffled_objects(ds: dict, seed: int, params: dict) -> dict[str, pd.DataFrame]:
    n_objects = params.get("n_objects", [3, 5, 7])
    n_swaps = params.get("n_swaps")
    total = ds["test_size"] + (0 if ds.get("eval_only") else ds["pool_size"])
    items = shuffled_objects.generate(total, n_objects, n_swaps, seed)
    items = items.drop_duplicates("prompt").sample(frac=1.0, random_state=seed).reset_index(drop=True)
    out = {"test": items.iloc[: ds["test_size"]].reset_index(drop=True)}
    if not ds.get("eval_only"):
        out["pool"] = items.iloc[ds["test_size"] :].reset_index(drop=True)
    return out


@dataclass(frozen=True)
class Generator:
    """A built-in task (a dataset's ``generator:``): how it is built and its difficulty metadata column."""

    build: Callable[[dict, int, dict], dict[str, pd.DataFrame]]  # (dataset entry, seed, params) -> {split: frame}
    difficulty: str
    params: tuple[str, ...]  # its knobs (the dataset's ``params:``); config validation refuses any other name


# The registry of built-in tasks; real benchmarks are in grpo_budget.prepare.benchmarks.BENCHMARKS.
GENERATORS: dict[str, Generator] = {
    "frame_arithmetic": Generator(_frame_arithmetic, difficulty="n_ops", params=framearith.PARAMS),
    "shuffled_objects": Generator(_shuffled_objects, difficulty="n_objects", params=shuffled_objects.PARAMS),
}


def build_builtin(ds: dict) -> dict[str, pd.DataFrame]:
    """Seeded built-in generators; train and test prompts are disjoint (test drawn first)."""
    return GENERATORS[ds["generator"]].build(ds, int(ds["seed"]), dict(ds.get("params", {})))


def build(ds: dict) -> dict[str, pd.DataFrame]:
    """Pool and test tables for a config dataset entry (built-in generator, the user's own files or a benchmark)."""
    if ds["source"] == "builtin":
        frames = build_builtin(ds)
    elif ds["source"] == "files":
        frames = userfiles.load(ds)
    else:
        frames = load_benchmark(ds["benchmark"], ds.get("spec", {}), int(ds["seed"]), unlabeled_pool=bool(ds.get("answers")))
        if ds.get("eval_only"):
            frames = {"test": frames["test"] if "test" in frames else frames["pool"]}
    frames = {split: apply_filter(frame, ds.get("filter")) for split, frame in frames.items()}
    if ds.get("answers") and "pool" in frames:
        # An unlabeled pool: whatever gold the source had is withheld, so nothing before training can use it.
        frames["pool"] = frames["pool"].assign(answer=None)
    for split, frame in frames.items():
        if frame.empty:
            raise UserError(f"the {split} split has no items (after the dataset's filter {ds.get('filter') or {}}); "
                            "check its data files, splits, filter and sizes")
        if frame["id"].duplicated().any():
            dup = frame.loc[frame["id"].duplicated(), "id"].head(3).tolist()
            raise UserError(f"the {split} split has duplicate ids, e.g. {dup}; map a unique id column with "
                            "spec: {fields: {id: COLUMN}} or drop the id mapping")
    if "pool" in frames and "test" in frames:
        check_leak(frames["pool"], frames["test"], "the test set")
    return frames


def check_leak(pool: pd.DataFrame, test: pd.DataFrame, where: str,
               fix: str = "give the pool and the test set disjoint data_files or spec.splits") -> None:
    """Refuse a pool that shares a prompt with ``test`` (``where``: the test side, as the message names it), compared
    :func:`~grpo_budget.prepare.rows.normalized`: a doubled space or a capital letter is still the same item."""
    keys = pool["prompt"].map(normalized)
    leaked = keys.isin(set(test["prompt"].map(normalized))).to_numpy()
    if leaked.any():
        shared = pool["prompt"][leaked]
        raise UserError(f"{keys[leaked].nunique()} pool prompt(s) are also in {where} once case, Unicode "
                        f"form and spacing are ignored (e.g. {excerpt(shared.iloc[0])!r}), so a model trained on the "
                        f"pool would be tested on items it trained on; take them out of the pool's data, or {fix}")


def apply_filter(frame: pd.DataFrame, filt: dict | None) -> pd.DataFrame:
    """Rows whose columns match every ``column: value`` (or ``column: [values]``) of ``filt``."""
    for column, wanted in (filt or {}).items():
        if column not in frame.columns:
            raise UserError(f"filter column {column!r} is not in the data; allowed: {', '.join(frame.columns)}")
        values = wanted if isinstance(wanted, list) else [wanted]
        frame = frame[frame[column].isin(values)]
    return frame.reset_index(drop=True)


def prepare(ds: dict, outputs: dict[str, str | Path], against: Iterable[str | Path] = ()) -> None:
    """Write each requested split (``outputs``: split → path); a pool written is first checked against ``against``,
    other datasets' test tables (Parquet written here) that its trained models are evaluated on."""
    frames = build(ds)
    if "pool" in outputs and "pool" in frames:
        for path in against:
            check_leak(frames["pool"], read_parquet(path, ["prompt"]), f"the test table {path}",
                       fix="stop evaluating this pool's models on that set (the dataset's ood list)")
    for split, path in outputs.items():
        if split not in frames:
            raise UserError(f"the dataset has no {split} split (it has: {', '.join(frames)}); check its data_files, "
                            "spec.splits and eval_only")
        write_parquet(frames[split], path)


def missing_answer(gold) -> bool:
    """Whether a gold answer is absent (an unlabeled pool's items)."""
    return gold is None or (isinstance(gold, float) and math.isnan(gold)) or str(gold).strip() == ""


def read_answers(path: str | Path) -> pd.DataFrame:
    """A dataset's ``answers:`` file (Parquet, JSON lines, JSON or CSV with columns ``id`` and ``answer``): the gold
    answers bought for an unlabeled pool's selected items."""
    path = Path(path)
    readers = {".parquet": pd.read_parquet, ".jsonl": lambda p: pd.read_json(p, lines=True), ".json": pd.read_json,
               ".csv": lambda p: pd.read_csv(p, dtype=str)}
    if path.suffix not in readers:
        raise UserError(f"{path}: an answers file is {', '.join(readers)}; got {path.suffix or 'no suffix'}")
    try:
        frame = readers[path.suffix](path)
    except (OSError, ValueError) as e:
        raise UserError(f"{path}: cannot read the answers file ({e})") from None
    if not {"id", "answer"} <= set(frame.columns):
        raise UserError(f"{path}: an answers file needs columns id and answer; it has {', '.join(frame.columns)}")
    frame = frame[["id", "answer"]].astype({"id": str})
    repeated = frame[frame["id"].duplicated(keep=False)]
    if len(repeated):
        first = repeated["id"].iloc[0]
        shown = ", ".join(repr(str(a)) for a in repeated.loc[repeated["id"] == first, "answer"])
        raise UserError(f"{path}: {repeated['id'].nunique()} id(s) appear more than once (e.g. {first} with answers "
                        f"{shown}); keep one row per id")
    return frame


def attach_answers(items: pd.DataFrame, ds: dict, where: str) -> pd.DataFrame:
    """``items`` with a gold answer for every row: their own, else the dataset's ``answers:`` file's. A selected
    item without one is a :class:`~grpo_budget.errors.UserError` naming the items (``where``: the subset file)."""
    lacking = items["answer"].map(missing_answer).to_numpy()
    if lacking.any() and ds.get("answers"):
        bought = read_answers(ds["answers"]).drop_duplicates("id").set_index("id")["answer"]
        filled = items["id"].astype(str).map(bought)
        items = items.assign(answer=[f if m else a for a, f, m in zip(items["answer"], filled, lacking)])
        lacking = items["answer"].map(missing_answer).to_numpy()
    if lacking.any():
        ids = items.loc[lacking, "id"].astype(str).tolist()
        source = f"the answers file {ds['answers']}" if ds.get("answers") else "the pool (no answers: file is set)"
        raise UserError(f"{where}: {len(ids)} selected item(s) have no gold answer in {source}: "
                        f"{', '.join(ids[:10])}{' ...' if len(ids) > 10 else ''}; add them to the answers file")
    return items

"""Prepare stage: a dataset entry of the config becomes a pool and a test table in Parquet."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from . import framearith, shuffled_objects
from .io import write_parquet

SPLITS = ("pool", "test")


def build_builtin(ds: dict) -> dict[str, pd.DataFrame]:
    """Seeded built-in generators; train and test prompts are disjoint (test drawn first)."""
    seed, params = int(ds.get("seed", 0)), dict(ds.get("params", {}))
    if ds["generator"] == "frame_arithmetic":
        test = framearith.generate(ds["test_size"], seed * 2 + 1, **params)
        out = {"test": test}
        if not ds.get("eval_only"):
            out["pool"] = framearith.generate(ds["pool_size"], seed * 2, **params, exclude=test["prompt"])
        return out
    if ds["generator"] == "shuffled_objects":
        n_objects = params.get("n_objects", [3, 5, 7])
        n_swaps = params.get("n_swaps")
        total = ds["test_size"] + (0 if ds.get("eval_only") else ds["pool_size"])
        items = shuffled_objects.generate(total, n_objects, n_swaps, seed)
        items = items.drop_duplicates("prompt").sample(frac=1.0, random_state=seed).reset_index(drop=True)
        out = {"test": items.iloc[: ds["test_size"]].reset_index(drop=True)}
        if not ds.get("eval_only"):
            out["pool"] = items.iloc[ds["test_size"] :].reset_index(drop=True)
        return out
    raise ValueError(f"unknown generator {ds['generator']!r}")


def build(ds: dict) -> dict[str, pd.DataFrame]:
    """Pool and test tables for a config dataset entry (built-in generator or real benchmark)."""
    if ds["source"] == "builtin":
        frames = build_builtin(ds)
    else:
        from .benchmarks import load_benchmark

        frames = load_benchmark(ds["benchmark"], ds.get("spec", {}), int(ds.get("seed", 0)))
        if ds.get("eval_only"):
            frames = {"test": frames["test"] if "test" in frames else frames["pool"]}
    frames = {split: apply_filter(frame, ds.get("filter")) for split, frame in frames.items()}
    for split, frame in frames.items():
        if frame["id"].duplicated().any():
            raise ValueError(f"{split}: duplicate ids")
        if frame.empty:
            raise ValueError(f"{split}: no items")
    if "pool" in frames and "test" in frames:
        overlap = set(frames["pool"]["prompt"]) & set(frames["test"]["prompt"])
        if overlap:
            raise ValueError(f"{len(overlap)} prompts are in both the pool and the test set")
    return frames


def apply_filter(frame: pd.DataFrame, filt: dict | None) -> pd.DataFrame:
    """Rows whose columns match every ``column: value`` (or ``column: [values]``) of ``filt``."""
    for column, wanted in (filt or {}).items():
        if column not in frame.columns:
            raise ValueError(f"filter column {column!r} is not in the data; allowed: {', '.join(frame.columns)}")
        values = wanted if isinstance(wanted, list) else [wanted]
        frame = frame[frame[column].isin(values)]
    return frame.reset_index(drop=True)


def prepare(ds: dict, outputs: dict[str, str | Path]) -> None:
    """Write each requested split (``outputs``: split → path)."""
    frames = build(ds)
    for split, path in outputs.items():
        if split not in frames:
            raise ValueError(f"dataset has no {split!r} split (it has: {', '.join(frames)})")
        write_parquet(frames[split], path)

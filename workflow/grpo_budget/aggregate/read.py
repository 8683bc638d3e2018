"""Reading the cached run files for the aggregate stage, and the order in which arms are shown."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from functools import lru_cache

import pandas as pd
import pyarrow.parquet as pq

from grpo_budget.experiment.plan import Listing, budget_sort_key
from grpo_budget.io import read_parquet
from grpo_budget.select.policies import POLICIES
from grpo_budget.select.sources import SOURCES, split_arm

# An arm is a policy at a budget, with one training variant of a sweep ("" without a sweep: the tables then have
# no variant column, see `finish`).
KEYS = ["model", "dataset", "policy", "budget", "variant", "seed"]
ARM = ["model", "dataset", "policy", "budget", "variant"]
PANEL = ["model", "dataset", "evalset"]


@lru_cache(maxsize=256)
def _read_cached(path: str, columns: tuple | None, _stamp: tuple) -> pd.DataFrame:
    return read_parquet(path, columns=list(columns) if columns else None)


def read_table(path: str, columns: Sequence[str] | None = None) -> pd.DataFrame:
    """A Parquet file (cached per path, columns and modification time; do not modify the result)."""
    st = os.stat(path)
    return _read_cached(str(path), tuple(columns) if columns else None, (st.st_mtime_ns, st.st_size))


def available_columns(path: str, wanted: Sequence[str]) -> list[str]:
    try:
        names = set(pq.read_schema(path).names)
    except Exception:  # noqa: BLE001 - read_parquet names the file and says how to recover
        read_parquet(path)
        raise
    return [c for c in wanted if c in names]


def eval_items(path: str) -> pd.DataFrame:
    """An evaluation file as rows (id, step) with accuracy and, where present, n_samples and n_correct."""
    cols = available_columns(path, ["id", "step", "accuracy", "n_samples", "n_correct"])
    return read_table(path, cols)


def _by_step(path: str) -> pd.DataFrame:
    """Per-item accuracy of an evaluation file: index id, one column per step."""
    ev = eval_items(path)
    return ev.pivot(index="id", columns="step", values="accuracy").sort_index()


def base_items(runs: Listing) -> dict:
    return {(b.model, b.evalset): b.path for b in runs.base}


def arm_label(policy: str, budget: str, variant: str = "") -> str:
    return f"{policy} @ {budget}" + (f" · {variant}" if variant else "")


def keys_in(df: pd.DataFrame, keys: Sequence[str]) -> list[str]:
    """The key columns ``df`` has (a table has a variant column only where the listing sweeps)."""
    return [k for k in keys if k in df]


def finish(df: pd.DataFrame, runs: Listing) -> pd.DataFrame:
    """A table as the listing calls for: without a sweep, no variant column (the tables are what they were
    before sweeps)."""
    return df if runs.variants or "variant" not in df else df.drop(columns="variant")


def policy_rank(arm: str) -> int:
    """Display rank of an arm: its policy's registry order, then its difficulty source's (labels first)."""
    policy, source = split_arm(arm)
    order, sources = list(POLICIES), list(SOURCES)
    return (order.index(policy) if policy in order else len(order)) * (len(sources) + 1) + (
        sources.index(source) if source in sources else len(sources))


def policy_color(arm: str) -> str:
    """An arm's colour: its policy's (its source tells it apart by line style or label)."""
    policy = split_arm(arm)[0]
    return POLICIES[policy].color if policy in POLICIES else "C7"


def sort_arms(df: pd.DataFrame, extra: Sequence[str] = ()) -> pd.DataFrame:
    if df.empty:
        return df
    tmp = {"_policy_rank": df["policy"].map(policy_rank),
           "_budget_kind": df["budget"].map(lambda b: budget_sort_key(str(b))[0]),
           "_budget_value": df["budget"].map(lambda b: budget_sort_key(str(b))[1])}
    if "evalset" in df:  # the training set's own test set first, then the out-of-distribution sets
        tmp["_ood"] = df["evalset"] != df["dataset"]
    if "variant" in df:  # variants in the listing's (the sweep's) order
        order = {v: i for i, v in enumerate(dict.fromkeys(df["variant"]))}
        tmp["_variant_rank"] = df["variant"].map(order)
    cols = ["model", "dataset"] + (["_ood", "evalset"] if "evalset" in df else []) + ["_policy_rank", "_budget_kind", "_budget_value"]
    cols += ["_variant_rank"] if "variant" in df else []
    cols += [c for c in extra if c in df]
    return df.assign(**tmp).sort_values(cols, kind="stable").drop(columns=list(tmp))




def panel_order(runs: Listing, items: Iterable, key=lambda item: item[0]) -> list:
    """``items`` (a figure's panels) in the one order every figure uses: models and datasets as the config lists
    them, a training set's own test set before its out-of-distribution sets; ``key(item)`` gives the panel's
    (model, dataset[, evalset, ...]). Panels the runs do not name go last, in their own order."""
    rank: dict[tuple, int] = {}
    for r in runs.runs:
        for e in [r.dataset, *[x for x in r.evals if x != r.dataset]]:
            rank.setdefault((r.model, r.dataset), len(rank))
            rank.setdefault((r.model, r.dataset, e), len(rank))
    for sc in runs.scores:
        rank.setdefault((sc.model, sc.dataset), len(rank))

    def where(item) -> tuple[int, int]:
        k = tuple(key(item))
        return rank.get(k[:3], rank.get(k[:2], len(rank))), rank.get(k[:2], len(rank))

    return sorted(items, key=where)


def shared_ids(groups: Iterable[list[dict]]) -> pd.Index:
    """The test items every record of every group scores: what the arms of a panel are compared on."""
    ids = None
    for recs in groups:
        for rec in recs:
            ids = rec["steps"].index if ids is None else ids.intersection(rec["steps"].index)
    return ids


def item_records(runs: Listing) -> list[dict]:
    """Per run and evaluation set: base and per-checkpoint per-item accuracy on the common items."""
    base = base_items(runs)
    out = []
    for r in runs.runs:
        for evalset, path in r.evals.items():
            b = _by_step(base[(r.model, evalset)])[0]
            t = _by_step(path)
            ids = b.index.intersection(t.index)
            if len(ids) < len(b):
                raise ValueError(f"{path}: {len(b) - len(ids)} of the base model's test items are missing")
            out.append({"run": r, "evalset": evalset, "ood": evalset != r.dataset, "base": b.loc[ids],
                        "steps": t.loc[ids]})
    return out

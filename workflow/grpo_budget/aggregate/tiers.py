"""Accuracy by difficulty tier of the test items (metadata or base pass-rate tiers, with truncated shares), and
out-of-distribution pass@k."""

from __future__ import annotations

import numpy as np
import pandas as pd

from grpo_budget.aggregate.gains import compare
from grpo_budget.aggregate.read import (
    ARM,
    KEYS,
    available_columns,
    base_items,
    eval_items,
    read_table,
    item_records,
    sort_arms,
    finish,
)
from grpo_budget.errors import UserError
from grpo_budget.experiment.plan import Listing
from grpo_budget.config.settings import Analysis
from grpo_budget.learnability import pass_at_k_items
from grpo_budget.prepare.benchmarks import BENCHMARKS
from grpo_budget.prepare.splits import GENERATORS

# Difficulty metadata the datasets carry (from the registries), in the order `stratify_by: auto` tries them.
METADATA_TIERS = tuple(dict.fromkeys([b.difficulty for b in BENCHMARKS.values() if b.difficulty]
                                     + [g.difficulty for g in GENERATORS.values()] + ["difficulty"]))
BASE_PASS_RATE = "base_pass_rate"


def stratify_setting(evalset: str, setting: str | dict) -> str:
    return setting.get(evalset, "auto") if isinstance(setting, dict) else setting


def _fmt_value(v) -> str:
    if isinstance(v, (float, np.floating)) and float(v).is_integer():
        return str(int(v))
    return str(v)


def tiers(test: pd.DataFrame, base: pd.DataFrame, how: str) -> tuple[pd.Series, list[str], str]:
    """Difficulty tier of each test item: ``(tier per id, the tiers in their natural order, what they come from)``.

    ``how``: ``auto`` (the first metadata column of :data:`METADATA_TIERS` the test set has with a known value on
    some item, else the base pass rate), ``base_pass_rate``, or a column of the test Parquet. A column with at most
    8 distinct values gives one tier per value; more gives quartiles. ``base_pass_rate`` uses the base model's
    per-item accuracy: with at most 8 samples per item each k/n is a tier, otherwise 0, (0, ⅓], (⅓, ⅔], (⅔, 1), 1.
    """
    if how == "auto":
        how = next((c for c in METADATA_TIERS if c in test.columns and test[c].notna().any()), BASE_PASS_RATE)
    if how == BASE_PASS_RATE:
        b = base.set_index("id")
        n = int(b["n_samples"].max()) if "n_samples" in b else 0
        if 0 < n <= 8 and "n_correct" in b and (b["n_samples"] == n).all():
            values = b["n_correct"].astype(int)
            order = [f"{k}/{n}" for k in range(n + 1)]
            tier = values.map(lambda k: f"{k}/{n}")
        else:
            acc = b["accuracy"]
            order = ["0", "(0, ⅓]", "(⅓, ⅔]", "(⅔, 1)", "1"]
            tier = pd.Series(np.select([acc <= 0, acc <= 1 / 3, acc <= 2 / 3, acc < 1], order[:4], order[4]),
                             index=acc.index)
        order = [o for o in order if (tier == o).any()]
        return tier.rename("tier"), order, "base pass rate"
    if how not in test.columns:
        raise UserError(f"analysis.stratify_by: the test set has no column {how!r}; allowed: auto, base_pass_rate, "
                        f"or one of {', '.join(test.columns)}")
    col = test.set_index("id")[how]
    known = col.dropna()
    if known.nunique() <= 8:
        values = sorted(known.unique(), key=lambda v: (not isinstance(v, (int, float, np.number)), v))
        order = [f"{how} {_fmt_value(v)}" for v in values]
        tier = col.map(lambda v: "missing" if pd.isna(v) else f"{how} {_fmt_value(v)}")
    else:
        cut = pd.qcut(pd.to_numeric(col), 4, duplicates="drop")
        order = [f"{how} {c}" for c in cut.cat.categories]
        tier = cut.astype(object).map(lambda c: "missing" if pd.isna(c) else f"{how} {c}")
    if (tier == "missing").any():
        order.append("missing")
    return tier.rename("tier"), order, how


def _truncation(path: str, step: int) -> pd.DataFrame | None:
    """Per item (index id) at one step of an evaluation file: ``n_samples`` and ``n_truncated`` (completions cut at
    max_new_tokens); None where the file has no ``n_truncated`` column."""
    cols = available_columns(path, ["id", "step", "n_samples", "n_truncated"])
    if not {"n_samples", "n_truncated"} <= set(cols):
        return None
    ev = read_table(path, cols)
    return ev[ev["step"] == step].set_index("id")[["n_samples", "n_truncated"]]


def _truncated_counts(counts: pd.DataFrame | None, ids: pd.Index) -> tuple[float, float]:
    """(truncated, samples) summed over ``ids``; NaN where unknown for any of them."""
    if counts is None:
        return np.nan, np.nan
    c = counts.reindex(ids)
    if c.isna().any().any():
        return np.nan, np.nan
    return float(c["n_truncated"].sum()), float(c["n_samples"].sum())


def _truncated_share(counts: list[tuple[float, float]]) -> float:
    """Pooled share of truncated completions over (truncated, samples) pairs (NaN if any is unknown)."""
    k = sum(c[0] for c in counts)
    n = sum(c[1] for c in counts)
    return float(k / n) if np.isfinite(k) and np.isfinite(n) and n > 0 else np.nan


def _tier_records(runs: Listing, s: Analysis) -> list[dict]:
    """Per run, evaluation set and tier: the base and final per-item accuracy, and the (truncated, samples) counts
    of the base model's and the final checkpoint's completions on the tier's items (NaN without ``n_truncated``)."""
    base = base_items(runs)
    out = []
    cache: dict[str, tuple] = {}
    base_trunc: dict[tuple, pd.DataFrame | None] = {}
    for rec in item_records(runs):
        r, evalset = rec["run"], rec["evalset"]
        if evalset not in cache:
            test = read_table(runs.tests[evalset])
            b = eval_items(base[(r.model, evalset)])
            cache[evalset] = tiers(test, b[b["step"] == 0], stratify_setting(evalset, s.stratify_by))
        if (r.model, evalset) not in base_trunc:
            base_trunc[(r.model, evalset)] = _truncation(base[(r.model, evalset)], 0)
        tier, order, source = cache[evalset]
        final_step = rec["steps"].columns.max()
        final = rec["steps"][final_step]
        final_trunc = _truncation(r.evals[evalset], final_step)
        t = tier.reindex(rec["base"].index)
        for i, name in enumerate(order):
            mask = (t == name).to_numpy()
            if mask.any():
                ids = rec["base"].index[mask]
                out.append({"run": r, "evalset": evalset, "stratify_by": source, "tier": name, "tier_order": i,
                            "base": rec["base"][mask], "final": final[mask],
                            "base_truncated": _truncated_counts(base_trunc[(r.model, evalset)], ids),
                            "final_truncated": _truncated_counts(final_trunc, ids)})
    return out


def difficulty_table(runs: Listing, s: Analysis, over_seeds: bool = False) -> pd.DataFrame:
    """Accuracy of the base model and of each arm's final checkpoint per difficulty tier of the test items.

    Per seed (default) or per arm over seeds (``over_seeds``), with bootstrap intervals. ``truncated_share`` and
    ``base_truncated_share``: the share of the final checkpoint's (pooled over seeds) and of the base model's
    completions on the tier's items that were cut at max_new_tokens (NaN where the evaluation files have no
    ``n_truncated``).
    """
    recs = _tier_records(runs, s)
    groups: dict[tuple, list[dict]] = {}
    for rec in recs:
        keys = KEYS if not over_seeds else ARM
        groups.setdefault((*[getattr(rec["run"], k) for k in keys], rec["evalset"], rec["tier"]), []).append(rec)
    rows = []
    for key, rs in groups.items():
        base = rs[0]["base"]
        c = compare(base.to_numpy(), np.stack([x["final"].loc[base.index].to_numpy() for x in rs]), s)
        keys = KEYS if not over_seeds else ARM
        rows.append({**dict(zip(keys + ["evalset", "tier"], key)), "stratify_by": rs[0]["stratify_by"],
                     "tier_order": rs[0]["tier_order"], **c,
                     "base_truncated_share": _truncated_share([rs[0]["base_truncated"]]),
                     "truncated_share": _truncated_share([x["final_truncated"] for x in rs])})
    cols = ["tier_order"] + (["seed"] if not over_seeds else [])
    return finish(sort_arms(pd.DataFrame(rows), cols).reset_index(drop=True), runs)


def ood_table(runs: Listing, s: Analysis, over_seeds: bool = False) -> pd.DataFrame:
    """Base vs final-checkpoint pass@k on every evaluation set other than the training set (``ood``).

    k runs over 1 and the number of samples per item (the smallest over base and trained evaluations).
    Empty (with its columns) when no dataset lists ``ood`` sets.
    """
    base = base_items(runs)
    groups: dict[tuple, list] = {}
    for r in runs.runs:
        for evalset, path in r.evals.items():
            if evalset == r.dataset:
                continue
            b = eval_items(base[(r.model, evalset)])
            b = b[b["step"] == 0].set_index("id").sort_index()
            t = eval_items(path)
            final_step = int(t["step"].max())
            t = t[t["step"] == final_step].set_index("id").reindex(b.index)
            if t["n_samples"].isna().any():
                raise ValueError(f"{path}: base test items missing at step {final_step}")
            keys = KEYS if not over_seeds else ARM
            groups.setdefault((*[getattr(r, k) for k in keys], evalset), []).append((b, t, final_step))
    rows = []
    for key, rs in groups.items():
        b = rs[0][0]
        n = int(min(b["n_samples"].min(), *(t["n_samples"].min() for _, t, _ in rs)))
        for k in sorted({1, n}):
            c = compare(pass_at_k_items(b, k), np.stack([pass_at_k_items(t, k) for _, t, _ in rs]), s)
            keys = KEYS if not over_seeds else ARM
            rows.append({**dict(zip(keys + ["evalset"], key)), "k": k, "n_samples": n,
                         "final_step": rs[0][2], **c})
    cols = KEYS + ["evalset", "k", "n_samples", "final_step", "n_seeds", "n_items", "base_acc", "final_acc",
                   "gain_pts", "gain_lo", "gain_hi"]
    if not rows:
        return finish(pd.DataFrame(columns=[c for c in cols if c != "seed" or not over_seeds]), runs)
    return finish(sort_arms(pd.DataFrame(rows), ["k"] + (["seed"] if not over_seeds else [])).reset_index(drop=True),
                  runs)

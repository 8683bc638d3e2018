"""Drift, the mechanism measured: how an arm's items moved between all-fail, mixed and all-solved from the pool's
scoring (the base model) to the same subset scored again by the trained model (its final adapter), with as many
samples per item and the same random draws (:mod:`grpo_budget.score.drift`).

An item at all-fail or all-solved gives a GRPO group no gradient; one that moved from all-fail to mixed is what
"hard examples keep providing learnable opportunities" means, and one that moved from mixed to all-solved has been
used up. Pure functions of count tables (``id``, ``n_samples``, ``n_correct``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

OUTCOMES = ("fail", "mixed", "solved")  # no sample correct, some, every one
OUTCOME_NAMES = {"fail": "all-fail", "mixed": "mixed", "solved": "all-solved"}
TRANSITIONS = [f"{a}_to_{b}" for a in OUTCOMES for b in OUTCOMES]  # the flat columns, row-major


def outcome(n_correct: object, n_samples: object) -> np.ndarray:
    """Each item's outcome over its own samples: ``fail`` (none correct), ``solved`` (all), else ``mixed``."""
    k = np.asarray(n_correct, dtype=float)
    n = np.asarray(n_samples, dtype=float)
    if np.any(~(n > 0)) or np.any(~np.isfinite(k)) or np.any((k < 0) | (k > n)):
        raise ValueError("every item needs n_samples > 0 and 0 <= n_correct <= n_samples")
    return np.where(k == 0, "fail", np.where(k == n, "solved", "mixed"))


def transitions(before: pd.DataFrame, after: pd.DataFrame) -> pd.DataFrame:
    """The 3 x 3 transition matrix of counts: rows the outcome ``before`` (the base model's scoring), columns the
    outcome ``after`` (the trained model's), over the items of ``after`` (matched by ``id``; every one must be in
    ``before``)."""
    b = before.set_index("id")[["n_samples", "n_correct"]]
    missing = after.loc[~after["id"].isin(b.index), "id"]
    if len(missing):
        raise ValueError(f"{len(missing)} rescored item(s) are not in the score table, e.g. {missing.iloc[0]!r}")
    b = b.loc[after["id"]]
    was = outcome(b["n_correct"], b["n_samples"])
    now = outcome(after["n_correct"], after["n_samples"])
    counts = pd.crosstab(pd.Categorical(was, OUTCOMES), pd.Categorical(now, OUTCOMES), dropna=False)
    counts.index.name, counts.columns.name = "before", "after"
    return counts.reindex(index=list(OUTCOMES), columns=list(OUTCOMES), fill_value=0).astype(int)


def flat(matrix: pd.DataFrame) -> dict[str, int]:
    """A transition matrix as :data:`TRANSITIONS` columns (``fail_to_mixed``: all-fail before, mixed after)."""
    return {f"{a}_to_{b}": int(matrix.loc[a, b]) for a in OUTCOMES for b in OUTCOMES}


def shares(row: dict) -> dict[str, float]:
    """From one row of :data:`TRANSITIONS` counts: the share of items mixed before and after (the items a GRPO
    group can learn from), the share of the all-fail items that became mixed or solved (``fail_moved``) and of the
    mixed items that became all-solved (``mixed_solved``); NaN where the row has no such item."""
    total = sum(row[c] for c in TRANSITIONS)
    fail = sum(row[f"fail_to_{b}"] for b in OUTCOMES)
    mixed = sum(row[f"mixed_to_{b}"] for b in OUTCOMES)
    mixed_after = sum(row[f"{a}_to_mixed"] for a in OUTCOMES)

    def ratio(a: float, b: float) -> float:
        return a / b if b else float("nan")

    return {"mixed_before": ratio(mixed, total), "mixed_after": ratio(mixed_after, total),
            "fail_moved": ratio(fail - row["fail_to_fail"], fail), "mixed_solved": ratio(row["mixed_to_solved"], mixed)}

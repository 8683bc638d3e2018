"""Cut a data budget out of a scored pool by policy. Pure functions of a table, a budget and a seed.

Pass rates are discrete (k/K), so many items tie; ties are broken by a seeded shuffle, never by file order.
"""

from __future__ import annotations

import math
import zlib

import numpy as np
import pandas as pd

POLICIES = ("easy", "medium", "hard", "random", "full", "tiers", "random_matched")
FIXED_SIZE = ("full", "tiers", "random_matched")  # policies whose size the budget does not set


def budget_size(budget: float | int, pool_size: int) -> int:
    """Items a budget buys: an int is a count, a float in (0, 1] a fraction of the pool (rounded half up, ≥ 1)."""
    if isinstance(budget, bool):
        raise ValueError(f"budget must be a number, got {budget!r}")
    if isinstance(budget, int):
        if not 1 <= budget <= pool_size:
            raise ValueError(f"budget {budget} is outside 1..{pool_size} (the pool size)")
        return budget
    if not 0 < budget <= 1:
        raise ValueError(f"budget fraction {budget} is outside (0, 1]")
    return max(1, min(pool_size, math.floor(budget * pool_size + 0.5)))


FULL_LABEL = "all"  # the budget label of the FIXED_SIZE policies


def parse_budget(label: str) -> float | int:
    """The budget a path label stands for: ``"0.1"`` → 0.1 (fraction), ``"100"`` → 100 (count), ``"all"`` → 1.0."""
    if label == FULL_LABEL:
        return 1.0
    return float(label) if any(c in label for c in ".eE") else int(label)


def difficulty_order(pass_rates: np.ndarray, seed: int) -> np.ndarray:
    """Indices from hardest (lowest pass rate) to easiest; ties in seeded random order."""
    rng = np.random.default_rng(seed)
    shuffled = rng.permutation(len(pass_rates))
    return shuffled[np.argsort(np.asarray(pass_rates)[shuffled], kind="stable")]


def in_tiers(scores: pd.DataFrame, tiers: dict | None) -> np.ndarray:
    """Mask of the items whose ``tiers["column"]`` is one of ``tiers["values"]``."""
    if not tiers:
        raise ValueError("policies tiers and random_matched need the dataset's `tiers: {column, values}`")
    if tiers["column"] not in scores.columns:
        raise ValueError(f"tiers column {tiers['column']!r} is not in the pool; allowed: {', '.join(scores.columns)}")
    return scores[tiers["column"]].isin(tiers["values"]).to_numpy()


def select(scores: pd.DataFrame, policy: str, budget: float | int, seed: int, tiers: dict | None = None
           ) -> pd.DataFrame:
    """The rows of ``scores`` that ``policy`` buys, with ``rank`` (1 = hardest in the pool) added.

    hard = the lowest pass rates, easy = the highest, medium = the window centred on the median of the
    difficulty order, random = a seeded uniform sample, full = the whole pool; tiers = every item of the
    given metadata tiers (e.g. MATH levels 1-2), random_matched = a seeded uniform sample of the same size
    (the size-matched control of Limits of Difficulty Scaling).
    """
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r}; allowed: {', '.join(POLICIES)}")
    n_pool = len(scores)
    # The tie-break seed mixes in nothing policy-specific: easy and hard see the same order, reversed.
    order = difficulty_order(scores["pass_rate"].to_numpy(), seed)
    rank = np.empty(n_pool, dtype=int)
    rank[order] = np.arange(1, n_pool + 1)
    if policy in ("tiers", "random_matched"):
        n = int(in_tiers(scores, tiers).sum())
        if n == 0:
            raise ValueError(f"no pool item has {tiers['column']} in {tiers['values']}")
    else:
        n = n_pool if policy == "full" else budget_size(budget, n_pool)
    if policy == "hard":
        chosen = order[:n]
    elif policy == "easy":
        chosen = order[::-1][:n]
    elif policy == "medium":
        start = (n_pool - n) // 2
        chosen = order[start : start + n]
    elif policy in ("random", "random_matched"):
        rng = np.random.default_rng([seed, zlib.crc32(b"random")])
        chosen = np.sort(rng.choice(n_pool, size=n, replace=False))
    elif policy == "tiers":
        chosen = np.flatnonzero(in_tiers(scores, tiers))
    else:
        chosen = order
    out = scores.iloc[chosen].copy()
    out.insert(1, "rank", rank[chosen])
    out.insert(2, "policy", policy)
    return out.reset_index(drop=True)

"""How well a label-free difficulty source tracks gold pass rates: Spearman's rho with a bootstrap interval, and
confident wrong majorities by gold pass-rate tier."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from grpo_budget import stats


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rank correlation (average ranks for ties); NaN when either side is constant."""
    rx, ry = pd.Series(x).rank().to_numpy(), pd.Series(y).rank().to_numpy()
    if np.ptp(rx) == 0 or np.ptp(ry) == 0:
        return float("nan")
    return float(np.corrcoef(rx, ry)[0, 1])


def spearman_ci(x: np.ndarray, y: np.ndarray, n_boot: int, seed: int, level: float = 0.95
                ) -> tuple[float, float, float]:
    """Spearman's ρ and its percentile bootstrap interval over items."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    rho = spearman(x, y)
    if math.isnan(rho):
        return rho, float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    boots = [spearman(x[i], y[i]) for i in (rng.integers(0, len(x), len(x)) for _ in range(n_boot))]
    lo, hi = np.nanquantile(boots, [(1 - level) / 2, (1 + level) / 2])
    return rho, float(lo), float(hi)


TIERS = [(0.0, 0.0, "0"), (0.0, 0.25, "(0, 0.25]"), (0.25, 0.5, "(0.25, 0.5]"), (0.5, 0.75, "(0.5, 0.75]"),
         (0.75, 1.0, "(0.75, 1]")]


CONFIDENT = 0.5  # a majority of more than half the samples


def tier_of(pass_rate: float) -> str:
    """The gold pass-rate tier of an item (:data:`TIERS`; 0 on its own, then quarter-open intervals)."""
    for lo, hi, name in TIERS:
        if (pass_rate == 0 and hi == 0) or lo < pass_rate <= hi:
            return name
    return "?"


def confident_wrong(scores: pd.DataFrame) -> pd.DataFrame:
    """By gold pass-rate tier: items, the share whose majority answer is wrong though more than :data:`CONFIDENT`
    of the samples give it (the failure that makes agreement rank a hard item as easy), with a Wilson interval."""
    wrong = ~scores.apply(lambda r: not pd.isna(r["majority_answer"]) and _majority_correct(r), axis=1)
    confident = scores["agreement"] > CONFIDENT
    tier = scores["pass_rate"].map(tier_of)
    rows = []
    for _, _, name in TIERS:
        m = (tier == name).to_numpy()
        n = int(m.sum())
        share = float((wrong & confident).to_numpy()[m].mean()) if n else float("nan")
        lo, hi = stats.wilson_interval(share, n, 0.95) if n else (float("nan"), float("nan"))
        rows.append({"tier": name, "items": n, "confident_wrong": share, "lo": lo, "hi": hi})
    return pd.DataFrame(rows)


def _majority_correct(row: pd.Series) -> bool:
    """Whether an item's majority answer is one its correct samples gave."""
    return any(ok and a == row["majority_answer"] for a, ok in zip(row["answers"], row["correct"]))

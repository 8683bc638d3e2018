"""Statistics helpers for grpo-budget: bootstrap intervals, gains, learnable share, pass@k.

Pure numpy/pandas; no model or training dependencies.

Conventions
-----------
* Accuracies are fractions in [0, 1]; *gains* (``gain``, ``gain_lo``, ``gain_hi``) are
  in percentage points (difference of fractions x 100).
* Relative gains are fractions: ``(trained - base) / (1 - base)``, i.e. the share of the
  base model's remaining headroom that training closed (1.0 = all of it; negative =
  regression). Undefined (``nan``) when ``base == 1``.
* Bootstrap intervals are percentile intervals over test items.
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Callable

import numpy as np
import pandas as pd

__all__ = [
    "bootstrap_ci",
    "paired_bootstrap_gain",
    "relative_gain",
    "predicted_learnable",
    "expected_learnable_share",
    "simulate_learnable",
    "learnable_from_log",
    "mean_spread",
    "pass_at_k",
]

# Resample in chunks so n_boot x n index matrices stay small (~8 MB of int64 per chunk).
_CHUNK_ELEMS = 1_000_000


def _as_1d(values: object, name: str) -> np.ndarray:
    arr = np.asarray(values, dtype=float)
    if arr.ndim != 1:
        arr = arr.ravel()
    if arr.size == 0:
        raise ValueError(f"{name} is empty")
    return arr


def _check_level(level: float) -> None:
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")


def _resample_indices(rng: np.random.Generator, n: int, n_boot: int):
    """Yield index matrices of shape (chunk, n) totalling n_boot rows."""
    rows = max(1, _CHUNK_ELEMS // max(n, 1))
    done = 0
    while done < n_boot:
        b = min(rows, n_boot - done)
        yield rng.integers(0, n, size=(b, n))
        done += b


def _apply_rows(stat: Callable, samples: np.ndarray) -> np.ndarray:
    """Apply ``stat`` to each row; use ``axis=1`` when the stat supports it."""
    try:
        out = np.asarray(stat(samples, axis=1), dtype=float)
        if out.shape == (samples.shape[0],):
            return out
    except TypeError:
        pass
    return np.array([stat(row) for row in samples], dtype=float)


def bootstrap_ci(
    values: object,
    n_boot: int = 2000,
    seed: int = 0,
    level: float = 0.95,
    stat: Callable = np.mean,
) -> tuple[float, float, float]:
    """Percentile bootstrap interval of ``stat`` over items.

    Returns ``(estimate, lo, hi)`` where ``estimate = stat(values)`` on the original
    data and ``lo``/``hi`` are the ``(1-level)/2`` and ``(1+level)/2`` quantiles of the
    statistic over ``n_boot`` resamples (items drawn with replacement). Deterministic
    for a given ``seed``. ``stat`` may accept ``axis=`` (vectorised) or take a 1-D array.
    """
    _check_level(level)
    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1, got {n_boot}")
    x = _as_1d(values, "values")
    rng = np.random.default_rng(seed)
    boots = np.concatenate(
        [_apply_rows(stat, x[idx]) for idx in _resample_indices(rng, x.size, n_boot)]
    )
    alpha = (1.0 - level) / 2.0
    lo, hi = np.quantile(boots, [alpha, 1.0 - alpha])
    return float(stat(x)), float(lo), float(hi)


def relative_gain(base_acc: float, trained_acc: float) -> float:
    """Relative gain ``(trained - base) / (1 - base)`` as a fraction of the headroom.

    When ``base_acc == 1`` there is no headroom and the ratio is undefined: returns
    ``nan`` (regardless of ``trained_acc``). Works elementwise on arrays too (``nan``
    where base is 1), but returns a float for scalar input.
    """
    base = np.asarray(base_acc, dtype=float)
    trained = np.asarray(trained_acc, dtype=float)
    headroom = 1.0 - base
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(headroom == 0.0, np.nan, (trained - base) / np.where(headroom == 0.0, 1.0, headroom))
    return float(out) if out.ndim == 0 else out  # type: ignore[return-value]


def paired_bootstrap_gain(
    base: object,
    trained: object,
    n_boot: int = 2000,
    seed: int = 0,
    level: float = 0.95,
) -> dict[str, float]:
    """Paired bootstrap of the accuracy gain of ``trained`` over ``base``.

    ``base`` and ``trained`` are per-test-item accuracies (0/1 or fractions) aligned on
    the same items. Each resample draws item indices once and applies them to both
    arrays, so item difficulty is shared between the two means.

    Returns a dict with ``base_acc``, ``trained_acc`` (fractions), ``gain``, ``gain_lo``,
    ``gain_hi`` (percentage points, ``(trained - base) * 100``) and ``rel_gain``,
    ``rel_gain_lo``, ``rel_gain_hi`` (fractions, see :func:`relative_gain`). Resamples
    whose base accuracy is exactly 1 have undefined relative gain and are excluded from
    the relative interval; if all are, the relative bounds are ``nan``.
    """
    _check_level(level)
    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1, got {n_boot}")
    b = _as_1d(base, "base")
    t = _as_1d(trained, "trained")
    if b.shape != t.shape:
        raise ValueError(f"base and trained must be aligned: {b.size} vs {t.size} items")
    rng = np.random.default_rng(seed)
    b_means, t_means = [], []
    for idx in _resample_indices(rng, b.size, n_boot):
        b_means.append(b[idx].mean(axis=1))
        t_means.append(t[idx].mean(axis=1))
    bm = np.concatenate(b_means)
    tm = np.concatenate(t_means)
    alpha = (1.0 - level) / 2.0
    q = [alpha, 1.0 - alpha]
    gain_lo, gain_hi = np.quantile((tm - bm) * 100.0, q)
    rel = np.asarray(relative_gain(bm, tm), dtype=float)
    rel = rel[np.isfinite(rel)]
    rel_lo, rel_hi = np.quantile(rel, q) if rel.size else (np.nan, np.nan)
    base_acc = float(b.mean())
    trained_acc = float(t.mean())
    return {
        "base_acc": base_acc,
        "trained_acc": trained_acc,
        "gain": (trained_acc - base_acc) * 100.0,
        "gain_lo": float(gain_lo),
        "gain_hi": float(gain_hi),
        "rel_gain": relative_gain(base_acc, trained_acc),
        "rel_gain_lo": float(rel_lo),
        "rel_gain_hi": float(rel_hi),
    }


def _check_G(G: int) -> None:
    if int(G) != G or G < 1:
        raise ValueError(f"G must be a positive integer, got {G}")


def predicted_learnable(p: object, G: int) -> np.ndarray:
    """Probability that a group of ``G`` Bernoulli(``p``) rewards has non-zero std.

    ``1 - p**G - (1 - p)**G`` elementwise; 0 for ``p`` in {0, 1} or ``G == 1``.
    """
    _check_G(G)
    p_arr = np.asarray(p, dtype=float)
    if np.any((p_arr < 0) | (p_arr > 1)) or np.any(np.isnan(p_arr)):
        raise ValueError("pass rates must lie in [0, 1]")
    return 1.0 - p_arr**G - (1.0 - p_arr) ** G


def expected_learnable_share(pass_rates: object, G: int) -> float:
    """Expected share of learnable groups when prompts are drawn uniformly from a subset.

    Mean of :func:`predicted_learnable` over the subset's per-item pass rates.
    """
    pr = _as_1d(pass_rates, "pass_rates")
    return float(predicted_learnable(pr, G).mean())


def simulate_learnable(p: float, G: int, n_groups: int, seed: int) -> float:
    """Monte-Carlo share of ``n_groups`` groups of ``G`` Bernoulli(``p``) rewards with non-zero std."""
    _check_G(G)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"p must lie in [0, 1], got {p}")
    if n_groups < 1:
        raise ValueError(f"n_groups must be >= 1, got {n_groups}")
    rng = np.random.default_rng(seed)
    rewards = (rng.random((n_groups, G)) < p).astype(float)
    return float((rewards.std(axis=1) > 0).mean())


def learnable_from_log(log_history: pd.DataFrame) -> pd.DataFrame:
    """Per-step and cumulative learnable share from TRL ``trainer.state.log_history``.

    Input: ``pd.DataFrame(trainer.state.log_history)``. Rows lacking a
    ``frac_reward_zero_std`` value (eval rows, the final train summary) are dropped.
    Output (sorted by step, fresh index) has columns ``step``, ``learnable`` (=
    ``1 - frac_reward_zero_std``: share of groups in that logging window whose rewards
    have non-zero std) and ``learnable_cum`` (running mean of ``learnable`` over logged
    steps — the "learnable %" of the Hard Examples paper; with a constant
    ``logging_steps`` each row weighs the same number of optimizer steps).

    Raises ``ValueError`` if ``frac_reward_zero_std`` or ``step`` is absent.
    """
    for col in ("frac_reward_zero_std", "step"):
        if col not in log_history.columns:
            raise ValueError(
                f"log_history has no '{col}' column (columns: {list(log_history.columns)}); "
                "expected TRL GRPOTrainer trainer.state.log_history"
            )
    df = log_history.loc[log_history["frac_reward_zero_std"].notna(), ["step", "frac_reward_zero_std"]]
    df = df.sort_values("step", kind="stable").reset_index(drop=True)
    learnable = 1.0 - df["frac_reward_zero_std"].astype(float)
    return pd.DataFrame(
        {
            "step": df["step"].astype(int).to_numpy(),
            "learnable": learnable.to_numpy(),
            "learnable_cum": learnable.expanding().mean().to_numpy(),
        }
    )


def mean_spread(values: object) -> tuple[float, float, int]:
    """Over-seed summary ``(mean, sample std (ddof=1), n)``.

    NaNs (e.g. a missing seed) are ignored and not counted in ``n``. The std is ``nan``
    when ``n == 1``; everything is ``nan`` (with ``n == 0``) for no finite values.
    """
    x = np.asarray(values, dtype=float).ravel()
    x = x[~np.isnan(x)]
    n = int(x.size)
    if n == 0:
        return float("nan"), float("nan"), 0
    std = float(x.std(ddof=1)) if n > 1 else float("nan")
    return float(x.mean()), std, n


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k estimator (Chen et al., 2021): ``1 - C(n-c, k) / C(n, k)``.

    ``n`` samples, ``c`` of them correct, ``1 <= k <= n``. Computed as a stable product.
    """
    if not (0 <= c <= n) or not (1 <= k <= n):
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def bootstrap_mean_ci(mat: np.ndarray, n_boot: int = 2000, seed: int = 0, level: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of ``mat`` (seeds × items).

    One seed: items resampled (:func:`bootstrap_ci`). Several: seeds and items resampled (two-stage; the
    same item draw applies to every seed, since all seeds are evaluated on the same test items).
    """
    mat = np.atleast_2d(np.asarray(mat, dtype=float))
    if mat.shape[0] == 1:
        _, lo, hi = bootstrap_ci(mat[0], n_boot=n_boot, seed=seed, level=level)
        return lo, hi
    S, N = mat.shape
    rng = np.random.default_rng(seed)
    chunk = max(1, 1_000_000 // (S * N))
    boots, done = [], 0
    while done < n_boot:
        b = min(chunk, n_boot - done)
        per_seed = mat[:, rng.integers(0, N, size=(b, N))].mean(axis=2)  # (S, b)
        pick = rng.integers(0, S, size=(b, S))
        boots.append(per_seed[pick, np.arange(b)[:, None]].mean(axis=1))
        done += b
    alpha = (1 - level) / 2
    lo, hi = np.quantile(np.concatenate(boots), [alpha, 1 - alpha])
    return float(lo), float(hi)


def window_steps(n_logged: int, window: float | int) -> int:
    """How many of the first logged steps the comparison uses: a count (int) or a fraction (float, rounded half
    up, at least one step)."""
    if n_logged <= 0:
        return 0
    if isinstance(window, float):
        return max(1, min(n_logged, math.floor(window * n_logged + 0.5)))
    return max(1, min(n_logged, int(window)))


def posterior_learnable(n_correct: np.ndarray, n_samples: np.ndarray, G: int) -> float:
    """Expected learnable share when each item's pass rate is uncertain: the mean over items of
    E[1 - p^G - (1 - p)^G] under p ~ Beta(c + ½, n - c + ½) (Jeffreys prior, c of n samples correct).

    The plug-in prediction is exactly 0 for every item scored 0/K or K/K, though such items still produce mixed
    groups now and then; this version gives them their posterior share.
    """
    c = np.asarray(n_correct, dtype=float)
    n = np.asarray(n_samples, dtype=float)
    a, b = c + 0.5, n - c + 0.5
    j = np.arange(G)[:, None]
    e_pG = np.prod((a + j) / (a + b + j), axis=0)  # E[p^G] = B(a + G, b) / B(a, b)
    e_qG = np.prod((b + j) / (a + b + j), axis=0)
    return float(np.mean(1 - e_pG - e_qG))


def wilson_interval(share: float, n: float, level: float) -> tuple[float, float]:
    """Wilson score interval of a share observed over ``n`` trials (NaN when there are none)."""
    if not n or not np.isfinite(share):
        return np.nan, np.nan
    z = NormalDist().inv_cdf(0.5 + level / 2)
    centre = (share + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(share * (1 - share) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def pass_at_k_items(items: pd.DataFrame, k: int) -> np.ndarray:
    """Per-item unbiased pass@k from the ``n_samples``/``n_correct`` columns of an evaluation file."""
    return np.array([pass_at_k(int(n), int(c), k) for n, c in zip(items.n_samples, items.n_correct)])

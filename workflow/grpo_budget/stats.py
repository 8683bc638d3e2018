"""Statistics helpers for grpo-budget: bootstrap intervals, gains, learnable share, pass@k.

numpy/pandas/scipy only; no model or training dependencies.

Conventions
-----------
* Accuracies are fractions in [0, 1]; *gains* (``gain``, ``gain_lo``, ``gain_hi``) are
  in percentage points (difference of fractions x 100).
* Relative gains are fractions: ``(trained - base) / (1 - base)``, i.e. the share of the
  base model's remaining headroom that training closed (1.0 = all of it; negative =
  regression). Undefined (``nan``) when ``base == 1``.
* Bootstrap intervals are percentile intervals over test items (and, with several
  seeds, over seeds too).
* Arm-vs-arm differences (``diff_pts``, ``lo``, ``hi``) are in percentage points,
  ``(A - B) x 100``.
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Callable

import numpy as np
import pandas as pd
from scipy import optimize, special
from scipy import stats as sps

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
    "fit_beta_prior",
    "beta_posterior",
    "expected_learnable_beta",
    "paired_difference_ci",
    "verdict",
    "rank_tiers",
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

    Mean of :func:`predicted_learnable` over the subset's per-item pass rates; NaN where some are unknown (NaN: an
    unlabeled pool's, or a proxy arm's, whose trained model never scored the pool).
    """
    pr = _as_1d(pass_rates, "pass_rates")
    if np.isnan(pr).any():
        return float("nan")
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
    return float(np.mean(expected_learnable_beta(c + 0.5, n - c + 0.5, G)))


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


# --- empirical-Bayes pass rates ----------------------------------------------------------

# Range for fitted Beta parameters: below 1e-3 the prior is numerically a point mass at 0/1, above 1e4 it is
# as sharp as ten thousand pseudo-samples, which no pool of a few thousand K=8 items can distinguish from more.
_BETA_MIN, _BETA_MAX = 1e-3, 1e4


def _counts(k: object, n: object) -> tuple[np.ndarray, np.ndarray]:
    """Validated float arrays ``k``, ``n`` broadcast to one shape (``n`` may be a scalar)."""
    k_arr, n_arr = np.broadcast_arrays(np.asarray(k, dtype=float), np.asarray(n, dtype=float))
    if np.any(~np.isfinite(k_arr)) or np.any(~np.isfinite(n_arr)):
        raise ValueError("counts must be finite")
    if np.any(k_arr < 0) or np.any(k_arr > n_arr):
        raise ValueError("need 0 <= k <= n for every item")
    return k_arr, n_arr


def _concentrated_prior(k_sum: float, n_sum: float) -> tuple[float, float]:
    m = k_sum / n_sum
    if m <= 0.0 or m >= 1.0:
        # Jeffreys-smoothed, so an all-0 (all-n) pool still gets a proper prior, just close to 0 (1).
        m = (k_sum + 0.5) / (n_sum + 1.0)
    a = float(np.clip(_BETA_MAX * m, _BETA_MIN, _BETA_MAX))
    b = float(np.clip(_BETA_MAX * (1.0 - m), _BETA_MIN, _BETA_MAX))
    return a, b


def fit_beta_prior(k: object, n: object) -> tuple[float, float]:
    """Maximum-likelihood ``(alpha, beta)`` of a beta-binomial model for per-item counts: ``k`` of ``n`` correct.

    The empirical-Bayes prior of a pool's pass rates (``p ~ Beta(alpha, beta)``, ``k ~ Binomial(n, p)``). ``n``
    may differ per item (or be a scalar); items with ``n == 0`` carry no information and are ignored. Optimised
    over log-parameters from a method-of-moments start; both parameters are kept within ``[1e-3, 1e4]``.

    Degenerate pools, where the likelihood has no interior maximum, get a strongly concentrated prior
    (``alpha + beta = 1e4``, clipped to that range) at the pooled mean ``sum k / sum n``: every item with the
    same ``k/n``, only ``n == 1`` items (Bernoulli outcomes identify the mean but not the spread), or every
    item 0 (or every item n), where the mean is Jeffreys-smoothed to ``(sum k + 1/2) / (sum n + 1)``.
    Raises ``ValueError`` if no item has ``n > 0``.
    """
    k_arr, n_arr = _counts(k, n)
    keep = n_arr.ravel() > 0
    k_arr, n_arr = k_arr.ravel()[keep], n_arr.ravel()[keep]
    if k_arr.size == 0:
        raise ValueError("no item has n > 0")
    k_sum, n_sum = float(k_arr.sum()), float(n_arr.sum())
    m = k_sum / n_sum
    p_hat = k_arr / n_arr
    var = float(np.mean((p_hat - m) ** 2))
    if m <= 0.0 or m >= 1.0 or np.all(n_arr == 1) or np.ptp(p_hat) == 0.0:
        return _concentrated_prior(k_sum, n_sum)

    # Method of moments: Var(k/n) = m(1-m) [1/n + (1 - 1/n) rho] with rho = 1 / (alpha + beta + 1); 1/n averaged.
    h = float(np.mean(1.0 / n_arr))
    rho = (var / (m * (1.0 - m)) - h) / (1.0 - h) if h < 1.0 else 1.0
    rho = float(np.clip(rho, 1.0 / (_BETA_MAX + 1.0), 1.0 / (1.0 + 2.0 * _BETA_MIN)))
    s0 = 1.0 / rho - 1.0
    x0 = np.log(np.clip([m * s0, (1.0 - m) * s0], _BETA_MIN, _BETA_MAX))

    # The likelihood depends on items only through (k, n): fit on the distinct pairs, weighted by their counts.
    pairs, w = np.unique(np.column_stack([k_arr, n_arr]), axis=0, return_counts=True)
    kk, nn, w = pairs[:, 0], pairs[:, 1], w / w.sum()

    def nll(x: np.ndarray) -> tuple[float, np.ndarray]:
        a, b = np.exp(x)
        ll = np.sum(w * (special.betaln(kk + a, nn - kk + b) - special.betaln(a, b)))
        common = special.digamma(a + b) - special.digamma(nn + a + b)
        da = np.sum(w * (special.digamma(kk + a) - special.digamma(a) + common))
        db = np.sum(w * (special.digamma(nn - kk + b) - special.digamma(b) + common))
        return -float(ll), -np.array([da * a, db * b])  # chain rule for the log-parameters

    bounds = [(math.log(_BETA_MIN), math.log(_BETA_MAX))] * 2
    res = optimize.minimize(nll, x0, jac=True, method="L-BFGS-B", bounds=bounds)
    # Keep the start if the optimiser wandered off (it should not, but a prior must always come back).
    x = res.x if np.all(np.isfinite(res.x)) and res.fun <= nll(x0)[0] else x0
    a, b = np.clip(np.exp(x), _BETA_MIN, _BETA_MAX)
    return float(a), float(b)


def beta_posterior(k: object, n: object, alpha: object, beta: object, level: float = 0.95) -> pd.DataFrame:
    """Per-item Beta posterior of the pass rate after ``k`` of ``n`` correct under a ``Beta(alpha, beta)`` prior.

    ``alpha``/``beta`` are scalars (one pool prior, e.g. from :func:`fit_beta_prior`) or per-item arrays.
    Returns a DataFrame with one row per item (index of ``k`` when it is a Series, else 0..N-1) and columns
    ``alpha``, ``beta`` (posterior parameters ``alpha + k``, ``beta + n - k``, ready for
    :func:`expected_learnable_beta`), ``mean`` (``(alpha + k) / (alpha + beta + n)``) and ``lo``/``hi`` (the
    equal-tailed ``level`` credible interval). Items with ``n == 0`` get the prior.
    """
    _check_level(level)
    k_arr, n_arr = _counts(k, n)
    k_arr, n_arr = np.atleast_1d(k_arr).ravel(), np.atleast_1d(n_arr).ravel()
    a0, b0 = np.asarray(alpha, dtype=float), np.asarray(beta, dtype=float)
    if np.any(~(a0 > 0)) or np.any(~(b0 > 0)):
        raise ValueError("prior parameters must be positive")
    a_post = np.broadcast_to(a0 + k_arr, k_arr.shape).astype(float)
    b_post = np.broadcast_to(b0 + n_arr - k_arr, k_arr.shape).astype(float)
    tail = (1.0 - level) / 2.0
    index = k.index if isinstance(k, pd.Series) and len(k) == k_arr.size else None
    return pd.DataFrame(
        {
            "alpha": a_post,
            "beta": b_post,
            "mean": a_post / (a_post + b_post),
            "lo": sps.beta.ppf(tail, a_post, b_post),
            "hi": sps.beta.ppf(1.0 - tail, a_post, b_post),
        },
        index=index,
    )


def expected_learnable_beta(a: object, b: object, G: int) -> np.ndarray:
    """Per item ``E[1 - p^G - (1 - p)^G]`` for ``p ~ Beta(a, b)``: the chance a group of ``G`` is mixed.

    Closed form: ``E[p^G] = B(a + G, b) / B(a, b) = prod_{j<G} (a + j) / (a + b + j)`` (likewise for
    ``1 - p`` with ``b``). ``a``/``b`` broadcast; the result has their broadcast shape.
    """
    _check_G(G)
    a_arr, b_arr = np.broadcast_arrays(np.asarray(a, dtype=float), np.asarray(b, dtype=float))
    if np.any(~(a_arr > 0)) or np.any(~(b_arr > 0)):
        raise ValueError("Beta parameters must be positive")
    shape = a_arr.shape
    a1, b1 = a_arr.ravel(), b_arr.ravel()
    j = np.arange(G)[:, None]
    e_pG = np.prod((a1 + j) / (a1 + b1 + j), axis=0)
    e_qG = np.prod((b1 + j) / (a1 + b1 + j), axis=0)
    return (1.0 - e_pG - e_qG).reshape(shape)


# --- arm-vs-arm comparisons ----------------------------------------------------------------


def _as_seed_items(values: object, name: str) -> np.ndarray:
    """(seeds x items) float matrix; 1-D input is one seed."""
    mat = np.atleast_2d(np.asarray(values, dtype=float))
    if mat.ndim != 2:
        raise ValueError(f"{name} must be 1-D (items) or 2-D (seeds x items), got shape {mat.shape}")
    if mat.size == 0:
        raise ValueError(f"{name} is empty")
    if np.any(np.isnan(mat)):
        raise ValueError(f"{name} has missing (NaN) scores")
    return mat


def paired_difference_ci(
    a: object, b: object, n_boot: int = 2000, seed: int = 0, level: float = 0.95
) -> dict[str, float]:
    """Difference of two arms' mean scores on the same test items, with a paired percentile bootstrap interval.

    ``a`` is (seeds_A x items), ``b`` is (seeds_B x items), per-item scores (0/1 or fractions) aligned on the
    same items; 1-D means one seed. Each replicate draws one item resample shared by both arms (the items are
    the same, so item difficulty cancels) and, independently per arm, a resample of that arm's seeds (so
    run-to-run variance widens the interval). With one seed per arm this is the plain paired item bootstrap of
    the per-item difference (:func:`bootstrap_ci` of ``100 * (a - b)``).

    Returns ``diff_pts`` (``100 * (mean(a) - mean(b))``), ``lo``, ``hi`` (points), ``mean_a``, ``mean_b``
    (fractions), ``n_items``, ``seeds_a``, ``seeds_b``.
    """
    _check_level(level)
    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1, got {n_boot}")
    A, B = _as_seed_items(a, "a"), _as_seed_items(b, "b")
    (sa, n), (sb, nb) = A.shape, B.shape
    if n != nb:
        raise ValueError(f"a and b must score the same items: {n} vs {nb} items")
    if sa == sb == 1:
        _, lo, hi = bootstrap_ci(100.0 * (A[0] - B[0]), n_boot=n_boot, seed=seed, level=level)
    else:
        rng = np.random.default_rng(seed)
        chunk = max(1, _CHUNK_ELEMS // ((sa + sb) * n))
        boots, done = [], 0
        while done < n_boot:
            m = min(chunk, n_boot - done)
            idx = rng.integers(0, n, size=(m, n))
            per_a = A[:, idx].mean(axis=2)  # (seeds_A, m): each seed's mean on the shared item draw
            per_b = B[:, idx].mean(axis=2)
            cols = np.arange(m)[:, None]
            mean_a = per_a[rng.integers(0, sa, size=(m, sa)), cols].mean(axis=1)
            mean_b = per_b[rng.integers(0, sb, size=(m, sb)), cols].mean(axis=1)
            boots.append(100.0 * (mean_a - mean_b))
            done += m
        tail = (1.0 - level) / 2.0
        lo, hi = (float(v) for v in np.quantile(np.concatenate(boots), [tail, 1.0 - tail]))
    mean_a, mean_b = float(A.mean()), float(B.mean())
    return {
        "diff_pts": 100.0 * (mean_a - mean_b),
        "lo": float(lo),
        "hi": float(hi),
        "mean_a": mean_a,
        "mean_b": mean_b,
        "n_items": int(n),
        "seeds_a": int(sa),
        "seeds_b": int(sb),
    }


def _check_better_is(better_is: str) -> None:
    if better_is not in ("higher", "lower"):
        raise ValueError(f"better_is must be 'higher' or 'lower', got {better_is!r}")


def verdict(lo: float, hi: float, better_is: str = "higher") -> str:
    """Verdict from an interval of ``A - B``: ``"A"``, ``"B"`` or ``"tie"`` (not distinguishable).

    With ``better_is="higher"`` A wins when ``lo > 0`` and B when ``hi < 0``; ``"lower"`` (e.g. a loss) swaps
    the two. An interval that touches or spans 0, or has NaN bounds, is a ``"tie"``.
    """
    _check_better_is(better_is)
    above, below = lo > 0, hi < 0
    if better_is == "lower":
        above, below = below, above
    return "A" if above else "B" if below else "tie"


def rank_tiers(
    means: dict[str, float], distinguishable: dict[tuple[str, str], bool], better_is: str = "higher"
) -> dict[str, int]:
    """Rank arms, separating only those whose difference is distinguishable.

    ``distinguishable[(x, y)]`` True means x is distinguishably better than y (e.g. ``verdict`` of x - y is
    ``"A"``). Either key order is accepted: a pair counts as distinguishable when either ``(x, y)`` or
    ``(y, x)`` is True, and which arm is better is read from ``means`` (higher, or lower with
    ``better_is="lower"``), which agrees with the convention for consistent inputs. Missing pairs are not
    distinguishable. An arm's rank is 1 + the number of arms distinguishably better than it, so arms
    indistinguishable from each other can share a rank (and ranks need not be consecutive).

    Returns ``{arm: rank}`` ordered by rank, then by mean (best first).
    """
    _check_better_is(better_is)
    for key in distinguishable:
        if len(key) != 2 or key[0] not in means or key[1] not in means or key[0] == key[1]:
            raise ValueError(f"distinguishable key {key!r} must be a pair of two different arms of means")
    sign = 1.0 if better_is == "higher" else -1.0

    def separated(x: str, y: str) -> bool:
        return bool(distinguishable.get((x, y), False)) or bool(distinguishable.get((y, x), False))

    ranks = {
        x: 1 + sum(1 for y in means if y != x and separated(x, y) and sign * (means[y] - means[x]) > 0)
        for x in means
    }
    return dict(sorted(ranks.items(), key=lambda kv: (kv[1], -sign * means[kv[0]])))

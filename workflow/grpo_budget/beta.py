"""Empirical-Bayes pass rates: a beta-binomial prior fitted to a pool's per-item counts, and each item's Beta
posterior under it."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from grpo_budget.stats import check_level

__all__ = ["beta_posterior", "fit_beta_prior", "log_hyperprior"]

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


def log_hyperprior(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Log density of Gelman et al.'s noninformative hyperprior for a Beta prior of rates (BDA3, section 5.3, eq.
    5.10): uniform on the mean ``a / (a + b)`` and on ``(a + b) ** -1/2``, i.e. ``p(a, b) ∝ (a + b) ** -5/2``,
    written in the log-parameters ``(log a, log b)`` the fit works in (the same density as in BDA3's
    ``(log(a / b), log(a + b))``: the map between them has Jacobian 1): ``log a + log b - 5/2 log(a + b)``."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return np.log(a) + np.log(b) - 2.5 * np.log(a + b)


def fit_beta_prior(k: object, n: object) -> tuple[float, float]:
    """The empirical-Bayes prior of a pool's pass rates (``p ~ Beta(alpha, beta)``, ``k ~ Binomial(n, p)``) from its
    per-item counts, ``k`` of ``n`` correct: the posterior mode of ``(alpha, beta)`` under
    :func:`log_hyperprior` (the beta-binomial likelihood times BDA3's hyperprior, maximised over the log-parameters).

    Why not the maximum-likelihood fit alone: when few samples per item cannot tell the items apart (most items at 0
    of 2, as a weak model's pool has), the likelihood is flat towards "every item has the same pass rate" and its
    maximum sits at the concentration bound, so every posterior collapses onto the pool mean. The hyperprior's
    density vanishes there (it is ∝ (alpha + beta) ** -1/2 in log concentration), so the mode keeps the spread that
    the data cannot rule out, as Chung et al. (2013)'s boundary-avoiding prior does for a variance; where the counts
    identify the spread, its one extra term changes the fit little. ``n`` may differ per item (or be a scalar);
    items with ``n == 0`` carry no information and are ignored. Both parameters stay within ``[1e-3, 1e4]``.

    Two pools identify no spread at all, and get a concentrated prior (``alpha + beta = 1e4``) at the pooled mean
    ``sum k / sum n``: only ``n == 1`` items (Bernoulli outcomes identify the mean but not the spread), and every
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
    if m <= 0.0 or m >= 1.0 or np.all(n_arr == 1):
        return _concentrated_prior(k_sum, n_sum)

    # Method of moments: Var(k/n) = m(1-m) [1/n + (1 - 1/n) rho] with rho = 1 / (alpha + beta + 1); 1/n averaged.
    p_hat = k_arr / n_arr
    var = float(np.mean((p_hat - m) ** 2))
    h = float(np.mean(1.0 / n_arr))
    rho = (var / (m * (1.0 - m)) - h) / (1.0 - h) if h < 1.0 else 1.0
    rho = float(np.clip(rho, 1.0 / (_BETA_MAX + 1.0), 1.0 / (1.0 + 2.0 * _BETA_MIN)))
    # Two starts: the moments' (at the bound when the pool looks homogeneous) and a spread one (concentration 2).
    starts = [np.log(np.clip([m * s0, (1.0 - m) * s0], _BETA_MIN, _BETA_MAX)) for s0 in (1.0 / rho - 1.0, 2.0)]

    # The likelihood depends on items only through (k, n): fit on the distinct pairs, weighted by their counts.
    pairs, w = np.unique(np.column_stack([k_arr, n_arr]), axis=0, return_counts=True)
    kk, nn, w = pairs[:, 0], pairs[:, 1], w / w.sum()
    per_item = 1.0 / k_arr.size  # the hyperprior counts once for the pool; the likelihood is averaged per item

    from scipy import optimize, special

    def neg_log_post(x: np.ndarray) -> tuple[float, np.ndarray]:
        a, b = np.exp(x)
        ll = np.sum(w * (special.betaln(kk + a, nn - kk + b) - special.betaln(a, b)))
        common = special.digamma(a + b) - special.digamma(nn + a + b)
        da = np.sum(w * (special.digamma(kk + a) - special.digamma(a) + common))
        db = np.sum(w * (special.digamma(nn - kk + b) - special.digamma(b) + common))
        lp = float(log_hyperprior(a, b))
        dlp = np.array([1.0 - 2.5 * a / (a + b), 1.0 - 2.5 * b / (a + b)])  # d/d(log a), d/d(log b)
        value = -(float(ll) + per_item * lp)
        return value, -(np.array([da * a, db * b]) + per_item * dlp)  # chain rule for the log-parameters

    bounds = [(math.log(_BETA_MIN), math.log(_BETA_MAX))] * 2
    best = min(starts, key=lambda x: neg_log_post(x)[0])
    for x0 in starts:
        res = optimize.minimize(neg_log_post, x0, jac=True, method="L-BFGS-B", bounds=bounds)
        # Keep a start if the optimiser wandered off (it should not, but a prior must always come back).
        if np.all(np.isfinite(res.x)) and res.fun < neg_log_post(best)[0]:
            best = res.x
    a, b = np.clip(np.exp(best), _BETA_MIN, _BETA_MAX)
    return float(a), float(b)


def beta_posterior(k: object, n: object, alpha: object, beta: object, level: float = 0.95) -> pd.DataFrame:
    """Per-item Beta posterior of the pass rate after ``k`` of ``n`` correct under a ``Beta(alpha, beta)`` prior.

    ``alpha``/``beta`` are scalars (one pool prior, e.g. from :func:`fit_beta_prior`) or per-item arrays.
    Returns a DataFrame with one row per item (index of ``k`` when it is a Series, else 0..N-1) and columns
    ``alpha``, ``beta`` (posterior parameters ``alpha + k``, ``beta + n - k``, ready for
    :func:`grpo_budget.learnability.expected_learnable_beta`), ``mean`` (``(alpha + k) / (alpha + beta + n)``)
    and ``lo``/``hi`` (the equal-tailed ``level`` credible interval). Items with ``n == 0`` get the prior.
    """
    from scipy import stats as sps

    check_level(level)
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


"""How many seeds would decide an arm-vs-arm comparison: variance components of a paired difference, the smallest
difference the current seeds and items detect, and the seeds per arm an undecided difference would need.

The model, per arm ``r`` (A or B), seed ``j`` and shared test item ``i``::

    score[r, j, i] = mu_r + u_i + v_ri + g_rj + e_rji

``u_i``: item difficulty, shared by both arms; ``v_ri``: item-by-arm interaction (an arm helps some items more);
``g_rj``: seed effect (run-to-run GRPO variance); ``e_rji``: noise (sampling, seed-by-item). With ``s_r`` seeds and
``n`` items, the observed difference ``D = mean(A) - mean(B)`` is::

    D = mu_A - mu_B + mean_i(v_Ai - v_Bi) + mean_j(g_Aj) - mean_j(g_Bj) + mean(e_A) - mean(e_B)

``u_i`` cancels (the items are shared); the item term ``w_i = v_Ai - v_Bi`` remains. Write ``V_r = var(g_r) +
mean_i var(e_ri) / n``, the variance of one seed's mean over the ``n`` items (what a sample variance of an arm's
per-seed means estimates, since the items are fixed across seeds). Then::

    Var(D; s_A, s_B, n) = var(w) / n + V_A / s_A + V_B / s_B

so more seeds shrink only the seed terms: ``var(w) / n`` is the floor that only more test items lower. Normal
approximation throughout; ``test="bootstrap"`` models the width of the verdicts' own interval, which differs from
``Var(D)`` (:func:`difference_variance`). numpy only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from grpo_budget.stats import check_level, paired_seed_items

__all__ = ["MAX_SEEDS", "POWER", "Components", "detectable_difference", "difference_variance", "seeds_needed",
           "variance_components"]

POWER = 0.8  # the conventional power: a true difference of the detectable size is decided 4 times in 5
MAX_SEEDS = 1000  # beyond this many seeds per arm, seeds_needed reports inf: in practice more test items are needed


@dataclass(frozen=True)
class Components:
    """Variance components of a paired arm-vs-arm difference, in squared fractions (scores in [0, 1]).

    ``item``: ``var(w)``, the item-by-arm interaction of the difference, net of noise; ``seed_a``, ``seed_b``: ``V_A``,
    ``V_B``, the variance of one seed's mean over the ``n_items`` shared items; ``noise_a``, ``noise_b``: the
    average per-item noise variance within an arm. All NaN when an arm has one seed (no run-to-run variance to
    estimate: needs >= 2 seeds per arm)."""

    item: float
    seed_a: float
    seed_b: float
    noise_a: float
    noise_b: float
    n_items: int
    seeds_a: int
    seeds_b: int


def _noise(mat: np.ndarray) -> float:
    """Residual mean square of the two-way (seeds x items) fit, at least 2 x 2: estimates the items' average noise
    variance, unbiased even when it differs by item (0/1 scores: p(1 - p) per item)."""
    s, n = mat.shape
    resid = mat - mat.mean(axis=1, keepdims=True) - mat.mean(axis=0, keepdims=True) + mat.mean()
    return float((resid ** 2).sum() / ((s - 1) * (n - 1)))


def variance_components(a: object, b: object) -> Components:
    """:class:`Components` of ``mean(a) - mean(b)`` from (seeds x items) score matrices on the same items.

    ``seed_r``: sample variance (ddof 1) of arm r's per-seed means. ``item``: sample variance over items of the
    per-item difference of seed-averaged scores, which also carries each arm's noise averaged over its seeds, so
    ``noise_a / s_A + noise_b / s_B`` is subtracted (clipped at 0 when noise explains all of it)."""
    A, B = paired_seed_items(a, b)
    (sa, n), (sb, _) = A.shape, B.shape
    if min(sa, sb) < 2 or n < 2:
        nan = math.nan
        return Components(nan, nan, nan, nan, nan, int(n), int(sa), int(sb))
    noise_a, noise_b = _noise(A), _noise(B)
    diff = A.mean(axis=0) - B.mean(axis=0)
    item = max(0.0, float(diff.var(ddof=1)) - noise_a / sa - noise_b / sb)
    return Components(item=item, seed_a=float(A.mean(axis=1).var(ddof=1)), seed_b=float(B.mean(axis=1).var(ddof=1)),
                      noise_a=noise_a, noise_b=noise_b, n_items=int(n), seeds_a=int(sa), seeds_b=int(sb))


def difference_variance(c: Components, seeds: float | np.ndarray | None = None, test: str = "normal") -> float:
    """The variance, in squared points (x 100^2), with ``seeds`` per arm (default: each arm's own) on ``c.n_items``
    items; ``seeds=math.inf`` gives the item floor ``var(w) / n``.

    ``test="normal"``: ``Var(D)`` itself (module docstring). ``test="bootstrap"``: the variance that the verdicts'
    percentile bootstrap (:func:`grpo_budget.stats.paired_difference_ci`) sees, which is not ``Var(D)``: its item
    resample, within a resample of s seeds, still carries each item's noise (``noise * (2s - 1) / s^2 / n``: a seed
    drawn twice counts twice), and its seed resample carries each seed's mean, noise included, shrunk by
    ``(s - 1) / s`` (``V * (s - 1) / s^2``)::

        var(w) / n + sum over arms of [(2/s - 1/s^2) * noise / n + (1/s - 1/s^2) * V]

    so it counts noise twice (wider than ``Var(D)`` with many seeds) and undercounts run-to-run variance with few
    (narrower with two seeds when seeds dominate); with one seed per arm, the plain item bootstrap."""
    if test not in ("normal", "bootstrap"):
        raise ValueError(f"test must be 'normal' or 'bootstrap', got {test!r}")
    sa, sb = (c.seeds_a, c.seeds_b) if seeds is None else (seeds, seeds)
    if test == "normal":
        return 1e4 * (c.item / c.n_items + c.seed_a / sa + c.seed_b / sb)

    def arm(s, noise, v):
        return (2 / s - 1 / s ** 2) * noise / c.n_items + (1 / s - 1 / s ** 2) * v

    return 1e4 * (c.item / c.n_items + arm(sa, c.noise_a, c.seed_a) + arm(sb, c.noise_b, c.seed_b))


def _z(p: float) -> float:
    check_level(p)
    return NormalDist().inv_cdf(p)


def detectable_difference(c: Components, level: float, power: float = POWER, seeds: float | np.ndarray | None = None,
                          test: str = "normal") -> float:
    """The smallest true difference (points) that a two-sided test at ``level`` decides with probability ``power``,
    with ``seeds`` per arm (default: the current seeds). NaN with a one-seed arm.

    ``D`` is normal with variance ``Var(D)`` and is decided when ``|D| > z_{1 - alpha/2} * se_test``, so the power
    reaches ``power`` at ``z_{1 - alpha/2} * se_test + z_power * sqrt(Var(D))``: with the normal test
    (``se_test = sqrt(Var(D))``) the textbook ``(z_{1 - alpha/2} + z_power) * sqrt(Var(D))``; with
    ``test="bootstrap"`` the verdicts' own interval (:func:`difference_variance`)."""
    z = _z(0.5 + level / 2)
    return z * np.sqrt(difference_variance(c, seeds, test)) + _z(power) * np.sqrt(difference_variance(c, seeds))


def seeds_needed(observed_diff: float, c: Components, level: float, power: float = POWER, test: str = "normal",
                 max_seeds: int = MAX_SEEDS) -> float:
    """The fewest seeds per arm (same items) at which a true difference of ``observed_diff`` points is decided with
    ``power``: the smallest s with ``detectable_difference(c, level, power, s, test) <= |observed_diff|``, at least 2
    with the bootstrap (one seed would hide run-to-run variance).

    NaN when there is nothing to say: the difference is 0 or NaN, ``c`` is unknown (a one-seed arm: needs >= 2
    seeds per arm), or the current seeds decide it already (``|observed_diff| > z_{1 - alpha/2} * se_test``).
    ``inf`` when no seed count reaches it (the item floor ``(z_{1 - alpha/2} + z_power) * sqrt(var(w) / n)`` is
    above it) or it would take more than ``max_seeds``: more test items are needed."""
    d = abs(observed_diff)
    if not np.isfinite(d) or d == 0 or not np.isfinite(difference_variance(c, test=test)):
        return math.nan
    if d > _z(0.5 + level / 2) * math.sqrt(difference_variance(c, test=test)):
        return math.nan
    s = np.arange(1 if test == "normal" else 2, max_seeds + 1)
    ok = np.flatnonzero(detectable_difference(c, level, power, s, test) <= d)
    return float(s[ok[0]]) if len(ok) else math.inf

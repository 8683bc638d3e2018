"""Shared statistics: bootstrap intervals, gains, over-seed spread, Wilson intervals, and arm-vs-arm differences
with their verdicts and rank tiers. Learnability and pass@k are in :mod:`grpo_budget.learnability`, the Beta prior
of pass rates in :mod:`grpo_budget.beta`.

numpy only; no model or training dependencies.

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

__all__ = [
    "bootstrap_ci",
    "bootstrap_mean_ci",
    "mean_spread",
    "paired_bootstrap_gain",
    "paired_difference_ci",
    "paired_seed_items",
    "rank_tiers",
    "relative_gain",
    "verdict",
    "wilson_interval",
]

# Resample in chunks so n_boot x n index matrices stay small (~8 MB of int64 per chunk).
_CHUNK_ELEMS = 1_000_000


def as_1d(values: object, name: str) -> np.ndarray:
    arr = np.asarray(values, dtype=float)
    if arr.ndim != 1:
        arr = arr.ravel()
    if arr.size == 0:
        raise ValueError(f"{name} is empty")
    return arr


def check_level(level: float) -> None:
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
    check_level(level)
    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1, got {n_boot}")
    x = as_1d(values, "values")
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
    check_level(level)
    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1, got {n_boot}")
    b = as_1d(base, "base")
    t = as_1d(trained, "trained")
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


def wilson_interval(share: float, n: float, level: float) -> tuple[float, float]:
    """Wilson score interval of a share observed over ``n`` trials (NaN when there are none)."""
    if not n or not np.isfinite(share):
        return np.nan, np.nan
    z = NormalDist().inv_cdf(0.5 + level / 2)
    centre = (share + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(share * (1 - share) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


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


def paired_seed_items(a: object, b: object) -> tuple[np.ndarray, np.ndarray]:
    """Two arms' (seeds x items) matrices (:func:`_as_seed_items`), refused unless they score the same items."""
    A, B = _as_seed_items(a, "a"), _as_seed_items(b, "b")
    if A.shape[1] != B.shape[1]:
        raise ValueError(f"a and b must score the same items: {A.shape[1]} vs {B.shape[1]} items")
    return A, B


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
    check_level(level)
    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1, got {n_boot}")
    A, B = paired_seed_items(a, b)
    (sa, n), (sb, _) = A.shape, B.shape
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

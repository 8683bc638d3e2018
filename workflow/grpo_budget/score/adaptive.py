"""Adaptive difficulty scoring: sample in rounds, and after each round keep sampling only the items whose place
in some configured subset is still in doubt.

Fixed-K scoring spends K samples on every item, although an item at 4/8 is neither among the hardest nor the
easiest 10% and a few samples tell so. The decisions that matter are the cuts the configured policies make at the
configured budgets. After each round every item's pass rate has an empirical-Bayes Beta posterior (the pool's own
prior, refitted each round); each (policy, budget) cut is an interval of pass rates; an item is in *doubt* while its
posterior gives more than ``1 - confidence`` to its being on the wrong side of some cut (pass rates within
``tolerance`` of a cut count as right on either side). Items in doubt get ``step`` more samples, up to
``max_samples`` each and ``mean_samples`` per item in all (most doubtful first); samples of ``mean_samples`` left
when every item is settled go to the items with any doubt left. Pure functions;
:mod:`grpo_budget.score.scoring` runs the rounds.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np
import pandas as pd

from grpo_budget.config.settings import Adaptive
from grpo_budget.select.policies import POLICIES, Pool, budget_size, difficulty_order
from grpo_budget.select.posterior import posterior, posterior_table


@dataclass(frozen=True)
class Target:
    """A selection decision adaptive scoring must settle: ``policy`` buying ``n`` items."""

    policy: str
    n: int


def targets(policies: list[str], budgets: list, pool_size: int, rounding: str = "half_up") -> list[Target]:
    """The cuts to settle: every configured policy whose choice depends on pass rates, at every budget."""
    out = []
    for policy in policies:
        if not POLICIES[policy].ranks:
            continue
        for budget in budgets:
            t = Target(policy, budget_size(budget, pool_size, rounding))
            if t not in out and t.n < pool_size:
                out.append(t)
    return out


def interval(means: np.ndarray, order: np.ndarray, chosen: np.ndarray) -> tuple[float, float]:
    """The pass-rate interval a cut keeps, in the pool's difficulty ``order`` (ascending ``means``, ties shuffled):
    from midway between the estimates just outside and inside its first chosen rank to midway between those at
    its last (0 or 1 where it reaches the end of the order). Items tied with the cut sit on its edge, so they stay
    in doubt until their samples part them."""
    ranks = np.empty(len(order), dtype=int)
    ranks[order] = np.arange(len(order))
    first, last = ranks[chosen].min(), ranks[chosen].max()
    m = np.asarray(means, dtype=float)[order]
    lo = (m[first - 1] + m[first]) / 2 if first > 0 else 0.0
    hi = (m[last] + m[last + 1]) / 2 if last < len(m) - 1 else 1.0
    return float(lo), float(hi)


def mass_inside(a: np.ndarray, b: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """``P(lo <= p <= hi)`` for ``p ~ Beta(a, b)``, per item."""
    from scipy import special

    return special.betainc(a, b, hi) - special.betainc(a, b, lo)


def unsettled(k: np.ndarray, n: np.ndarray, cuts: list[Target], confidence: float, seed: int,
              num_generations: int | None = None, tolerance: float = 0.0) -> np.ndarray:
    """Mask of the items whose side of some cut the posterior does not yet tell at ``confidence`` (pass rates within
    ``tolerance`` of a cut count as right on either side, as in :func:`allocation`)."""
    return doubt(posterior_table(k, n), cuts, seed, num_generations, tolerance) > 1 - confidence


def doubt(table: pd.DataFrame, cuts: list[Target], seed: int, num_generations: int | None = None,
          tolerance: float = 0.0) -> np.ndarray:
    """Per item, the largest posterior probability, over the cuts, that the item is on the wrong side of one: inside
    a cut's interval though not chosen, or outside it though chosen."""
    a, b = posterior(table)
    means = table["pass_rate_eb"].to_numpy()
    order = difficulty_order(means, seed)
    pool = Pool(table, order, seed, None, num_generations)
    worst = np.zeros(len(table))
    for cut in cuts:
        chosen = POLICIES[cut.policy].choose(pool, cut.n)
        lo, hi = interval(means, order, chosen)
        wrong = mass_inside(a, b, lo + tolerance, hi - tolerance) if hi - lo > 2 * tolerance else np.zeros(len(a))
        wrong[chosen] = 1 - mass_inside(a[chosen], b[chosen], max(0.0, lo - tolerance), min(1.0, hi + tolerance))
        worst = np.maximum(worst, wrong)
    return worst


def allocation(k: np.ndarray, n: np.ndarray, settings: Adaptive, cuts: list[Target], seed: int,
               num_generations: int | None = None) -> np.ndarray:
    """Samples each item gets in the next round: ``first`` for an unsampled item; then ``step`` (capped at
    ``max_samples``) for each item still in doubt, the most doubtful first while the total stays within
    ``mean_samples`` per item; 0 otherwise. With ``mean_samples`` set, once no item is in doubt at ``confidence``
    the samples left go on, round by round, to the items with any doubt left (most doubtful first): the budget is
    spent where a cut can still move. All zeros: scoring is done."""
    n = np.asarray(n, dtype=int)
    if not n.any():
        return np.full(len(n), min(settings.first, settings.max_samples))
    more = np.minimum(settings.step, settings.max_samples - n)
    if not cuts:
        return np.zeros(len(n), dtype=int)
    d = doubt(posterior_table(k, n), cuts, seed, num_generations, settings.tolerance)
    want = np.where((d > 1 - settings.confidence) & (more > 0), more, 0)
    if settings.mean_samples is not None:
        left = max(0, int(settings.mean_samples * len(n)) - int(n.sum()))
        if not want.any() and left:
            # Settled at `confidence` with budget left (a pool mostly at 0 or at K settles early): spend it.
            want = np.where((d > 0) & (more > 0), more, 0)
        by_doubt = np.argsort(-d, kind="stable")
        fits = np.cumsum(want[by_doubt]) <= left
        keep = np.zeros(len(n), dtype=bool)
        keep[by_doubt[fits]] = True
        want = np.where(keep, want, 0)
    return want


def round_seed(seed: int, r: int) -> int:
    """The sampling seed of round ``r``: the scoring seed for the first, then one derived from (seed, r), so each
    round draws fresh samples and the same config draws the same ones."""
    return seed if r == 0 else zlib.crc32(f"{seed}/round-{r}".encode()) & 0x7FFFFFFF

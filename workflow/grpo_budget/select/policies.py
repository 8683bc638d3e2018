"""Cut a data budget out of a scored pool by policy. Pure functions of a table, a budget and a seed.

:data:`POLICIES` is the registry of selection policies: the one place a policy's name exists (the config schema's
enum, the Snakefile's wildcard and the analysis' order and colours all come from it). Adding a policy is one entry
here and its test.

Pass rates are discrete (k/K), so many items tie; ties are broken by a seeded shuffle, never by file order.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from grpo_budget.errors import UserError
from grpo_budget.learnability import expected_learnable_beta
from grpo_budget.select import sources
from grpo_budget.select.posterior import posterior


@dataclass(frozen=True)
class Pool:
    """What a policy chooses from: the scored pool, its difficulty order (hardest first) and the run's seed."""

    scores: pd.DataFrame
    order: np.ndarray
    seed: int
    tiers: dict | None
    num_generations: int | None = None  # the group size G the subset will train with (the learnable policy)


@dataclass(frozen=True)
class Policy:
    """A selection policy: which ``n`` items of a pool it buys, and how the analysis draws it."""

    choose: Callable[[Pool, int], np.ndarray]  # (pool, n) -> row indices
    color: str
    size: Callable[[Pool], int] | None = None  # its own size (budget ignored); None: the budget sets it
    doc: str = ""
    ranks: bool = False  # its choice depends on the pass-rate estimates (adaptive scoring settles its cut)
    needs_num_generations: bool = False  # its choice depends on the training group size
    seeded: bool = False  # its subset changes with the seed (beyond breaking ties): each seed buys other items


def _seeded_sample(pool: Pool, n: int) -> np.ndarray:
    rng = np.random.default_rng([pool.seed, zlib.crc32(b"random")])
    return np.sort(rng.choice(len(pool.scores), size=n, replace=False))


def _medium(pool: Pool, n: int) -> np.ndarray:
    start = (len(pool.order) - n) // 2
    return pool.order[start : start + n]


def learnable_scores(scores: pd.DataFrame, num_generations: int) -> np.ndarray:
    """Each item's posterior expected learnable share ``E[1 - p^G - (1 - p)^G]``: the chance that a GRPO group of
    ``num_generations`` completions (G) has mixed rewards (a non-zero advantage)."""
    return expected_learnable_beta(*posterior(scores), num_generations)


def _learnable(pool: Pool, n: int) -> np.ndarray:
    return seeded_order(-learnable_scores(pool.scores, pool.num_generations), pool.seed)[:n]


def in_tiers(scores: pd.DataFrame, tiers: dict | None) -> np.ndarray:
    """Mask of the items whose ``tiers["column"]`` is one of ``tiers["values"]``."""
    if not tiers:
        raise UserError("policies tiers and random_matched need the dataset's `tiers: {column, values}`")
    if tiers["column"] not in scores.columns:
        raise UserError(f"tiers column {tiers['column']!r} is not in the pool; allowed: {', '.join(scores.columns)}")
    return scores[tiers["column"]].isin(tiers["values"]).to_numpy()


def _tier_count(pool: Pool) -> int:
    n = int(in_tiers(pool.scores, pool.tiers).sum())
    if n == 0:
        raise ValueError(f"no pool item has {pool.tiers['column']} in {pool.tiers['values']}")
    return n


# Display order (tables, legends) is the order of this dict.
POLICIES: dict[str, Policy] = {
    "hard": Policy(lambda pool, n: pool.order[:n], "#d62728", doc="the lowest base pass rates", ranks=True),
    "medium": Policy(_medium, "#2ca02c", doc="the window centred on the median of the difficulty order", ranks=True),
    "easy": Policy(lambda pool, n: pool.order[::-1][:n], "#1f77b4", doc="the highest base pass rates", ranks=True),
    "learnable": Policy(_learnable, "#17becf", ranks=True, needs_num_generations=True,
                        doc="the highest posterior expected learnable share for the training group size G"),
    "random": Policy(_seeded_sample, "#ff7f0e", doc="a seeded uniform sample", seeded=True),
    "full": Policy(lambda pool, n: pool.order, "#555555", size=lambda pool: len(pool.scores),
                   doc="the whole pool"),
    "tiers": Policy(lambda pool, n: np.flatnonzero(in_tiers(pool.scores, pool.tiers)), "#9467bd", size=_tier_count,
                    doc="every item of the dataset's metadata tiers (e.g. MATH levels 1-2)"),
    "random_matched": Policy(_seeded_sample, "#8c564b", size=_tier_count, seeded=True,
                             doc="a seeded uniform sample as large as `tiers` (Limits of Difficulty Scaling's control)"),
}


def fixed_size(arm: str) -> bool:
    """Whether an arm's policy sets its own size, so that the budget does not apply (one run per grid point)."""
    return policy_of(arm).size is not None


def arm_names() -> list[str]:
    """Every arm a config may list: each policy, and ``POLICY@SOURCE`` for each policy that ranks by difficulty and
    each source of :data:`grpo_budget.select.sources.SOURCES`."""
    return list(POLICIES) + [f"{p}{sources.ARM_SEPARATOR}{s}" for p, spec in POLICIES.items() if spec.ranks
                             for s in sources.SOURCES]


def policy_of(arm: str) -> Policy:
    """The registry entry of an arm's policy (``hard@agreement`` → ``hard``)."""
    return POLICIES[sources.split_arm(arm)[0]]


ROUNDING = {"half_up": lambda x: math.floor(x + 0.5), "floor": math.floor}


def budget_size(budget: float | int, pool_size: int, rounding: str = "half_up") -> int:
    """Items a budget buys: an int is a count, a float in (0, 1] a fraction of the pool, rounded by ``rounding``
    (``half_up``, or ``floor`` as paper 1's ``int(0.1 * N)``), never below one item."""
    if isinstance(budget, bool):
        raise ValueError(f"budget must be a number, got {budget!r}")
    if isinstance(budget, int):
        if not 1 <= budget <= pool_size:
            raise ValueError(f"budget {budget} is outside 1..{pool_size} (the pool size)")
        return budget
    if not 0 < budget <= 1:
        raise ValueError(f"budget fraction {budget} is outside (0, 1]")
    return max(1, min(pool_size, ROUNDING[rounding](budget * pool_size)))


def seeded_order(values: np.ndarray, seed: int) -> np.ndarray:
    """Indices sorting ``values`` ascending; ties in seeded random order."""
    rng = np.random.default_rng(seed)
    shuffled = rng.permutation(len(values))
    return shuffled[np.argsort(np.asarray(values)[shuffled], kind="stable")]


def difficulty(scores: pd.DataFrame) -> np.ndarray:
    """The pass-rate estimate that orders a pool: the empirical-Bayes posterior mean where the score table has it
    (with equal K per item it orders exactly as k/K, ties included; with adaptive scoring's unequal counts it
    ranks 0/32 below 0/4), else ``pass_rate``."""
    return scores["pass_rate_eb" if "pass_rate_eb" in scores.columns else "pass_rate"].to_numpy()


def difficulty_order(pass_rates: np.ndarray, seed: int) -> np.ndarray:
    """Indices from hardest (lowest pass rate) to easiest; ties in seeded random order."""
    return seeded_order(pass_rates, seed)


def select(scores: pd.DataFrame, arm: str, budget: float | int, seed: int, tiers: dict | None = None,
           rounding: str = "half_up", num_generations: int | None = None, source: str = "labels") -> pd.DataFrame:
    """The rows of ``scores`` that an arm buys: its policy (see :data:`POLICIES`) ranking by its difficulty source
    (``POLICY@SOURCE``, else ``source``; see :data:`grpo_budget.select.sources.SOURCES`), with ``rank`` (1 = hardest in
    the pool by that source), ``difficulty`` (the estimate it ranked by), ``difficulty_source`` and
    ``scoring_labels`` (gold answers the ranking needed: the pool for a label source, else 0). The score columns
    stay as scored (gold pass rates where the pool has them). ``num_generations``: the training group size G
    (``learnable``)."""
    policy, source = sources.split_arm(arm, source)
    if policy not in POLICIES:
        raise UserError(f"unknown policy {policy!r}; allowed: {', '.join(POLICIES)}")
    if source not in sources.SOURCES:
        raise UserError(f"unknown difficulty source {source!r}; allowed: {', '.join(sources.SOURCES)}")
    spec = POLICIES[policy]
    if spec.needs_num_generations and not num_generations:
        raise UserError(f"policy {policy} needs the training group size (training.num_generations): --group-size G")
    n_pool = len(scores)
    ranked = sources.ranking_counts(scores, source) if spec.ranks else scores
    values = difficulty(ranked)
    # The tie-break seed mixes in nothing policy-specific: easy and hard see the same order, reversed.
    order = difficulty_order(values, seed)
    rank = np.empty(n_pool, dtype=int)
    rank[order] = np.arange(1, n_pool + 1)
    pool = Pool(ranked, order, seed, tiers, num_generations)
    n = spec.size(pool) if spec.size else budget_size(budget, n_pool, rounding)
    chosen = spec.choose(pool, n)
    out = scores.iloc[chosen].copy()
    out.insert(1, "rank", rank[chosen])
    out.insert(2, "policy", arm)
    uses_labels = spec.ranks and sources.SOURCES[source].labels
    out = out.assign(difficulty=values[chosen], difficulty_source=source if spec.ranks else "none",
                     scoring_labels=n_pool if uses_labels else 0).reset_index(drop=True)
    return sources.as_proxy_columns(out) if spec.ranks and sources.SOURCES[source].proxy else out

"""The one empirical-Bayes posterior of an item's pass rate: a Beta prior fitted to the whole pool's counts
(``eb_prior_a``, ``eb_prior_b``), and each item's posterior under it. Scoring writes it, adaptive scoring refits it
each round, and every policy orders by its mean."""

from __future__ import annotations

import numpy as np
import pandas as pd

from grpo_budget.beta import beta_posterior, fit_beta_prior

EB_COLUMNS = ["pass_rate_eb", "pass_rate_eb_lo", "pass_rate_eb_hi", "eb_prior_a", "eb_prior_b"]


def with_posterior(graded: pd.DataFrame, level: float = 0.95) -> pd.DataFrame:
    """The empirical-Bayes pass rate of each item beside its k/K: the posterior mean and ``level`` interval under a
    Beta prior fitted to the whole pool's counts (``eb_prior_a``, ``eb_prior_b``). It shrinks the ties at 0/K and
    K/K toward the pool, by as much as the pool says such items differ. An unlabeled pool has none (NaN)."""
    if graded["n_correct"].isna().any():
        return graded.assign(**{c: float("nan") for c in EB_COLUMNS})
    a, b = fit_beta_prior(graded["n_correct"], graded["n_samples"])
    post = beta_posterior(graded["n_correct"].to_numpy(), graded["n_samples"].to_numpy(), a, b, level)
    return graded.assign(pass_rate_eb=post["mean"].to_numpy(), pass_rate_eb_lo=post["lo"].to_numpy(),
                         pass_rate_eb_hi=post["hi"].to_numpy(), eb_prior_a=a, eb_prior_b=b)


def posterior(scores: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Each item's Beta posterior ``(alpha, beta)`` of its pass rate under the pool's empirical-Bayes prior (the
    score table's ``eb_prior_a``/``eb_prior_b``, or fitted here to its counts)."""
    k, n = scores["n_correct"].to_numpy(float), scores["n_samples"].to_numpy(float)
    if {"eb_prior_a", "eb_prior_b"} <= set(scores.columns):
        a, b = float(scores["eb_prior_a"].iloc[0]), float(scores["eb_prior_b"].iloc[0])
    else:
        a, b = fit_beta_prior(k, n)
    return a + k, b + n - k


def posterior_table(k: np.ndarray, n: np.ndarray) -> pd.DataFrame:
    """Counts with their empirical-Bayes posterior mean and prior, as the score table has them (what the policies
    read)."""
    a, b = fit_beta_prior(k, n)
    k, n = np.asarray(k, float), np.asarray(n, float)
    return pd.DataFrame({"n_correct": k, "n_samples": n, "pass_rate_eb": (a + k) / (a + b + n),
                         "eb_prior_a": a, "eb_prior_b": b})

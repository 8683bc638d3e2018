"""Learnability math: the chance a GRPO group of G rewards is mixed (plug-in, Monte-Carlo, under a Beta posterior),
the learnable share read from a trainer log and its comparison window, and unbiased pass@k. G, the group size, is
``num_generations`` (the config's ``training.num_generations``) in code; formulas write it G."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from grpo_budget.stats import as_1d

__all__ = [
    "expected_learnable_beta",
    "expected_learnable_share",
    "learnable_from_log",
    "pass_at_k",
    "pass_at_k_items",
    "posterior_learnable",
    "predicted_learnable",
    "simulate_learnable",
    "window_steps",
]


def _check_num_generations(num_generations: int) -> None:
    if int(num_generations) != num_generations or num_generations < 1:
        raise ValueError(f"G (num_generations) must be a positive integer, got {num_generations}")


def predicted_learnable(p: object, num_generations: int) -> np.ndarray:
    """Probability that a group of G (``num_generations``) Bernoulli(``p``) rewards has non-zero std.

    ``1 - p**G - (1 - p)**G`` elementwise; 0 for ``p`` in {0, 1} or ``G == 1``.
    """
    _check_num_generations(num_generations)
    p_arr = np.asarray(p, dtype=float)
    if np.any((p_arr < 0) | (p_arr > 1)) or np.any(np.isnan(p_arr)):
        raise ValueError("pass rates must lie in [0, 1]")
    return 1.0 - p_arr**num_generations - (1.0 - p_arr) ** num_generations


def expected_learnable_share(pass_rates: object, num_generations: int) -> float:
    """Expected share of learnable groups when prompts are drawn uniformly from a subset.

    Mean of :func:`predicted_learnable` over the subset's per-item pass rates; NaN where some are unknown (NaN: an
    unlabeled pool's, or a proxy arm's, whose trained model never scored the pool).
    """
    pr = as_1d(pass_rates, "pass_rates")
    if np.isnan(pr).any():
        return float("nan")
    return float(predicted_learnable(pr, num_generations).mean())


def simulate_learnable(p: float, num_generations: int, n_groups: int, seed: int) -> float:
    """Monte-Carlo share of ``n_groups`` groups of G (``num_generations``) Bernoulli(``p``) rewards with non-zero
    std."""
    _check_num_generations(num_generations)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"p must lie in [0, 1], got {p}")
    if n_groups < 1:
        raise ValueError(f"n_groups must be >= 1, got {n_groups}")
    rng = np.random.default_rng(seed)
    rewards = (rng.random((n_groups, num_generations)) < p).astype(float)
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


def window_steps(n_logged: int, window: float | int) -> int:
    """How many of the first logged steps the comparison uses: a count (int) or a fraction (float, rounded half
    up, at least one step)."""
    if n_logged <= 0:
        return 0
    if isinstance(window, float):
        return max(1, min(n_logged, math.floor(window * n_logged + 0.5)))
    return max(1, min(n_logged, int(window)))


def expected_learnable_beta(a: object, b: object, num_generations: int) -> np.ndarray:
    """Per item ``E[1 - p^G - (1 - p)^G]`` for ``p ~ Beta(a, b)``: the chance a group of G (``num_generations``) is
    mixed.

    Closed form: ``E[p^G] = B(a + G, b) / B(a, b) = prod_{j<G} (a + j) / (a + b + j)`` (likewise for
    ``1 - p`` with ``b``). ``a``/``b`` broadcast; the result has their broadcast shape.
    """
    _check_num_generations(num_generations)
    a_arr, b_arr = np.broadcast_arrays(np.asarray(a, dtype=float), np.asarray(b, dtype=float))
    if np.any(~(a_arr > 0)) or np.any(~(b_arr > 0)):
        raise ValueError("Beta parameters must be positive")
    shape = a_arr.shape
    a1, b1 = a_arr.ravel(), b_arr.ravel()
    j = np.arange(num_generations)[:, None]
    e_pG = np.prod((a1 + j) / (a1 + b1 + j), axis=0)
    e_qG = np.prod((b1 + j) / (a1 + b1 + j), axis=0)
    return (1.0 - e_pG - e_qG).reshape(shape)


def posterior_learnable(n_correct: np.ndarray, n_samples: np.ndarray, num_generations: int) -> float:
    """Expected learnable share when each item's pass rate is uncertain: the mean over items of
    E[1 - p^G - (1 - p)^G] under p ~ Beta(c + ½, n - c + ½) (Jeffreys prior, c of n samples correct).

    The plug-in prediction is exactly 0 for every item scored 0/K or K/K, though such items still produce mixed
    groups now and then; this version gives them their posterior share.
    """
    c = np.asarray(n_correct, dtype=float)
    n = np.asarray(n_samples, dtype=float)
    return float(np.mean(expected_learnable_beta(c + 0.5, n - c + 0.5, num_generations)))


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k estimator (Chen et al., 2021): ``1 - C(n-c, k) / C(n, k)``.

    ``n`` samples, ``c`` of them correct, ``1 <= k <= n``. Computed as a stable product.
    """
    if not (0 <= c <= n) or not (1 <= k <= n):
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def pass_at_k_items(items: pd.DataFrame, k: int) -> np.ndarray:
    """Per-item unbiased pass@k from the ``n_samples``/``n_correct`` columns of an evaluation file."""
    return np.array([pass_at_k(int(n), int(c), k) for n, c in zip(items.n_samples, items.n_correct)])

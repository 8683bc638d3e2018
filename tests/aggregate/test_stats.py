"""Tests for grpo_budget.stats, grpo_budget.learnability and grpo_budget.beta."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from grpo_budget.beta import beta_posterior, fit_beta_prior
from grpo_budget.learnability import (
    expected_learnable_beta,
    expected_learnable_share,
    learnable_from_log,
    pass_at_k,
    posterior_learnable,
    predicted_learnable,
    simulate_learnable,
)
from grpo_budget.stats import (
    bootstrap_ci,
    mean_spread,
    paired_bootstrap_gain,
    paired_difference_ci,
    rank_tiers,
    relative_gain,
    verdict,
)

# --- bootstrap_ci -------------------------------------------------------------------


def test_bootstrap_matches_normal_approximation_for_bernoulli_mean():
    rng = np.random.default_rng(123)
    n = 2000
    x = (rng.random(n) < 0.3).astype(float)
    est, lo, hi = bootstrap_ci(x, n_boot=2000, seed=1)
    p_hat = x.mean()
    half = 1.959964 * math.sqrt(p_hat * (1 - p_hat) / n)
    assert est == pytest.approx(p_hat)
    assert lo < est < hi
    assert (hi - lo) / 2 == pytest.approx(half, rel=0.12)
    assert (lo + hi) / 2 == pytest.approx(p_hat, abs=0.25 * half)


def test_bootstrap_level_controls_width():
    x = np.random.default_rng(0).normal(size=300)
    _, lo90, hi90 = bootstrap_ci(x, level=0.90)
    _, lo99, hi99 = bootstrap_ci(x, level=0.99)
    assert hi99 - lo99 > hi90 - lo90


def test_bootstrap_degenerate_data_has_zero_width():
    assert bootstrap_ci(np.full(50, 0.7)) == pytest.approx((0.7, 0.7, 0.7))
    assert bootstrap_ci([1.0]) == (1.0, 1.0, 1.0)


def test_bootstrap_is_seeded():
    x = np.random.default_rng(5).random(100)
    assert bootstrap_ci(x, seed=7) == bootstrap_ci(x, seed=7)
    assert bootstrap_ci(x, seed=7) != bootstrap_ci(x, seed=8)


def test_bootstrap_custom_stat_with_and_without_axis():
    x = np.arange(21, dtype=float)
    est, lo, hi = bootstrap_ci(x, stat=np.median, n_boot=500)
    assert est == 10.0 and lo <= 10.0 <= hi
    est2, lo2, hi2 = bootstrap_ci(x, stat=lambda v: float(np.max(v)), n_boot=200)
    assert est2 == 20.0 and hi2 == 20.0 and lo2 <= 20.0


def test_bootstrap_rejects_bad_input():
    with pytest.raises(ValueError):
        bootstrap_ci([])
    with pytest.raises(ValueError):
        bootstrap_ci([1.0, 2.0], level=1.0)


# --- paired_bootstrap_gain ------------------------------------------------------------


def test_paired_gain_identical_arrays_is_zero_with_zero_width():
    x = (np.random.default_rng(2).random(200) < 0.4).astype(float)
    r = paired_bootstrap_gain(x, x)
    assert r["gain"] == 0.0
    assert r["gain_lo"] == 0.0 and r["gain_hi"] == 0.0
    assert r["rel_gain"] == 0.0
    assert r["rel_gain_lo"] == 0.0 and r["rel_gain_hi"] == 0.0
    assert r["base_acc"] == r["trained_acc"] == pytest.approx(x.mean())


def test_paired_gain_values_and_pairing():
    rng = np.random.default_rng(3)
    base = (rng.random(400) < 0.4).astype(float)
    # Per item 0 -> 0.1 and 1 -> 1.0: the trained mean closes exactly 10% of the headroom
    # in every paired resample, so the relative-gain interval collapses to 0.1.
    trained = base * 0.9 + 0.1
    r = paired_bootstrap_gain(base, trained, n_boot=1000, seed=0)
    expected_gain = 10.0 * (1 - base.mean())
    assert r["gain"] == pytest.approx(expected_gain)
    assert r["gain_lo"] <= r["gain"] <= r["gain_hi"]
    # relative gain is exactly 0.1 in every resample
    assert r["rel_gain"] == pytest.approx(0.1)
    assert r["rel_gain_lo"] == pytest.approx(0.1) and r["rel_gain_hi"] == pytest.approx(0.1)
    assert set(r) == {
        "base_acc", "trained_acc", "gain", "gain_lo", "gain_hi",
        "rel_gain", "rel_gain_lo", "rel_gain_hi",
    }


def test_paired_gain_narrower_than_unpaired():
    rng = np.random.default_rng(4)
    difficulty = rng.random(500)
    base = (rng.random(500) < difficulty).astype(float)
    trained = np.maximum(base, (rng.random(500) < 0.15).astype(float))
    r = paired_bootstrap_gain(base, trained, n_boot=1000)
    _, blo, bhi = bootstrap_ci(base, n_boot=1000)
    _, tlo, thi = bootstrap_ci(trained, n_boot=1000)
    unpaired_width = 100 * math.hypot((bhi - blo), (thi - tlo))
    assert r["gain_hi"] - r["gain_lo"] < unpaired_width
    assert r["gain_lo"] > 0


def test_paired_gain_base_perfect_gives_nan_relative():
    r = paired_bootstrap_gain(np.ones(20), np.ones(20), n_boot=100)
    assert r["gain"] == 0.0
    assert math.isnan(r["rel_gain"]) and math.isnan(r["rel_gain_lo"])


def test_paired_gain_misaligned_raises():
    with pytest.raises(ValueError):
        paired_bootstrap_gain([0, 1, 1], [1, 1])


# --- relative_gain --------------------------------------------------------------------


@pytest.mark.parametrize(
    "base, trained, expected",
    [
        (0.5, 0.75, 0.5),
        (0.0, 0.3, 0.3),
        (0.2, 1.0, 1.0),
        (0.6, 0.6, 0.0),
        (0.5, 0.25, -0.5),
    ],
)
def test_relative_gain_cases(base, trained, expected):
    assert relative_gain(base, trained) == pytest.approx(expected)


def test_relative_gain_base_one_is_nan():
    assert math.isnan(relative_gain(1.0, 1.0))
    assert math.isnan(relative_gain(1.0, 0.5))


# --- learnable share ------------------------------------------------------------------


def test_predicted_learnable_edge_values():
    np.testing.assert_allclose(predicted_learnable([0.0, 1.0], 8), [0.0, 0.0])
    np.testing.assert_allclose(predicted_learnable(0.5, 2), 0.5)
    np.testing.assert_allclose(predicted_learnable(0.3, 1), 0.0)
    with pytest.raises(ValueError):
        predicted_learnable(1.2, 4)
    with pytest.raises(ValueError):
        predicted_learnable(0.5, 0)


@pytest.mark.parametrize("p", [0.02, 0.1, 0.5, 0.85])
@pytest.mark.parametrize("G", [2, 4, 8, 16])
def test_predicted_learnable_matches_simulation(p, G):
    n_groups = 20_000
    pred = float(predicted_learnable(p, G))
    sim = simulate_learnable(p, G, n_groups, seed=G * 100 + int(p * 100))
    se = math.sqrt(max(pred * (1 - pred), 1e-4) / n_groups)
    assert abs(sim - pred) < 5 * se


def test_expected_learnable_share_is_mean():
    pr = [0.0, 0.5, 1.0, 0.25]
    G = 4
    assert expected_learnable_share(pr, G) == pytest.approx(
        np.mean([1 - p**G - (1 - p) ** G for p in pr])
    )


def test_learnable_from_log_synthetic():
    log = pd.DataFrame(
        [
            {"loss": 0.1, "frac_reward_zero_std": 0.5, "step": 1},
            {"eval_loss": 0.3, "step": 1},
            {"loss": 0.2, "frac_reward_zero_std": 0.25, "step": 2},
            {"loss": 0.3, "frac_reward_zero_std": 1.0, "step": 3},
            {"train_runtime": 12.0, "train_loss": 0.2, "step": 3},
        ]
    )
    out = learnable_from_log(log)
    assert list(out.columns) == ["step", "learnable", "learnable_cum"]
    assert out["step"].tolist() == [1, 2, 3]
    np.testing.assert_allclose(out["learnable"], [0.5, 0.75, 0.0])
    np.testing.assert_allclose(out["learnable_cum"], [0.5, 0.625, 1.25 / 3])


def test_learnable_from_log_missing_column_raises():
    with pytest.raises(ValueError, match="frac_reward_zero_std"):
        learnable_from_log(pd.DataFrame({"step": [1, 2], "loss": [0.1, 0.2]}))


# --- mean_spread ----------------------------------------------------------------------


def test_mean_spread():
    m, s, n = mean_spread([1.0, 2.0, 3.0])
    assert (m, n) == (2.0, 3) and s == pytest.approx(1.0)
    m, s, n = mean_spread([4.0])
    assert m == 4.0 and math.isnan(s) and n == 1
    m, s, n = mean_spread([1.0, float("nan"), 3.0])
    assert (m, n) == (2.0, 2)
    m, s, n = mean_spread([])
    assert n == 0 and math.isnan(m)


# --- pass_at_k ------------------------------------------------------------------------


def test_pass_at_k_known_values():
    assert pass_at_k(10, 0, 1) == 0.0
    assert pass_at_k(10, 10, 5) == 1.0
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)
    assert pass_at_k(5, 2, 2) == pytest.approx(1 - math.comb(3, 2) / math.comb(5, 2))  # 0.7
    assert pass_at_k(4, 1, 4) == 1.0
    assert pass_at_k(100, 7, 10) == pytest.approx(1 - math.comb(93, 10) / math.comb(100, 10))
    with pytest.raises(ValueError):
        pass_at_k(5, 6, 1)
    with pytest.raises(ValueError):
        pass_at_k(5, 1, 6)


# --- empirical-Bayes prior and posterior -----------------------------------------------


def _beta_binomial_pool(alpha, beta, n, seed):
    rng = np.random.default_rng(seed)
    size = np.size(n) if np.ndim(n) else 5000
    p = rng.beta(alpha, beta, size)
    return p, rng.binomial(n, p)


def test_fit_beta_prior_recovers_known_parameters():
    _, k = _beta_binomial_pool(0.6, 1.4, 8, seed=7)
    a, b = fit_beta_prior(k, 8)
    assert a == pytest.approx(0.6, rel=0.15)
    assert b == pytest.approx(1.4, rel=0.15)


def test_fit_beta_prior_varying_n_and_empty_items():
    n = np.random.default_rng(3).integers(1, 17, 5000)
    _, k = _beta_binomial_pool(2.0, 3.0, n, seed=4)
    a, b = fit_beta_prior(k, n)
    assert a == pytest.approx(2.0, rel=0.15)
    assert b == pytest.approx(3.0, rel=0.15)
    # n == 0 items carry no information and are ignored
    assert fit_beta_prior(np.r_[k, 0, 0], np.r_[n, 0, 0]) == pytest.approx((a, b))


@pytest.mark.parametrize(
    "k, n, mean",
    [
        ([0] * 50, 8, 0.0),  # all 0/8
        ([8] * 50, 8, 1.0),  # all 8/8
        ([1, 0, 1, 1], 1, 0.75),  # n == 1: spread unidentifiable
    ],
)
def test_fit_beta_prior_degenerate_pools_give_concentrated_prior(k, n, mean):
    a, b = fit_beta_prior(k, n)
    assert 1e-3 <= a <= 1e4 and 1e-3 <= b <= 1e4
    assert a + b > 1000  # strongly concentrated
    assert a / (a + b) == pytest.approx(mean, abs=0.05)


@pytest.mark.parametrize("k, n, mean", [([4, 2, 4, 1], [8, 4, 8, 2], 0.5), ([3], 8, 3 / 8)])
def test_pools_that_show_no_spread_keep_one_at_the_hyperprior_mode(k, n, mean):
    # Every item at the same k/n, or one item: the likelihood is highest with no spread at all, the hyperprior's
    # mode is not (its density vanishes there): a finite concentration, the mean between k/n and 1/2 (the
    # hyperprior's mean(1 - mean) factor pulls a pool this small towards 1/2).
    a, b = fit_beta_prior(k, n)
    assert 0.5 < a + b < 100
    assert min(mean, 0.5) - 1e-9 <= a / (a + b) <= max(mean, 0.5) + 1e-9


def _log_posterior(a, b, k, n):
    """The hyperparameters' log posterior, from scipy's beta-binomial pmf and BDA3's eq. 5.10 written out."""
    from scipy import stats as sps

    return sps.betabinom.logpmf(k, n, a, b).sum() + np.log(a) + np.log(b) - 2.5 * np.log(a + b)


# 1,000 items at 2 samples each, 80% at 0/2: as binomial as a pool of equal pass rates would be, so the
# likelihood's maximum sits at the concentration bound (alpha + beta = 1e4: every posterior the pool mean 0.105).
MOSTLY_UNSOLVED = (np.repeat([0, 1, 2], [800, 190, 10]), np.full(1000, 2))


def test_fit_beta_prior_is_the_mode_of_the_hyperparameters_posterior():
    from scipy import optimize

    k, n = MOSTLY_UNSOLVED
    a, b = fit_beta_prior(k, n)
    # an independent maximisation: Nelder-Mead over the log-parameters, several starts
    runs = [optimize.minimize(lambda x: -_log_posterior(*np.exp(x), k, n), np.log([0.1 * s, 0.9 * s]),
                              method="Nelder-Mead", options={"xatol": 1e-9, "fatol": 1e-12, "maxiter": 4000})
            for s in (1.0, 30.0, 1000.0)]
    mode = np.exp(min(runs, key=lambda r: r.fun).x)
    assert (a, b) == pytest.approx(tuple(mode), rel=1e-3)
    assert _log_posterior(a, b, k, n) >= _log_posterior(1050.0, 8950.0, k, n)  # above the likelihood's bound fit


@pytest.mark.parametrize("mirror", [False, True])
def test_the_prior_keeps_a_mostly_unsolved_pool_apart(mirror):
    # 80% of the items at 0/2 (or, mirrored, at 2/2): the counts cannot rule out a spread of pass rates, so the
    # prior keeps one (alpha + beta about 51, sd of p about 0.04), and an item's counts move its posterior.
    k, n = MOSTLY_UNSOLVED
    k = n - k if mirror else k
    a, b = fit_beta_prior(k, n)
    a, b = (b, a) if mirror else (a, b)
    assert (a, b) == pytest.approx((5.405, 45.77), rel=1e-3)
    post = beta_posterior(np.array([2, 1, 0]) if mirror else np.array([0, 1, 2]), 2, *fit_beta_prior(k, n))
    means = post["mean"].to_numpy()
    means = 1 - means if mirror else means
    assert means == pytest.approx([0.1016, 0.1204, 0.1392], abs=1e-3)  # (5.4 + k) / (51.2 + 2)
    assert (post["hi"] - post["lo"] > 0.15).all()  # 95% intervals as wide as the pool's spread


@pytest.mark.parametrize("seed", [3, 4])
def test_posterior_intervals_cover_the_true_rates_of_a_mostly_unsolved_pool(seed):
    # True pass rates from Beta(5, 45) (mean 0.1, sd 0.04), two samples each: about 80% of the items at 0/2, and
    # with these seeds the likelihood alone puts every item at the pool mean (90% intervals covering 9% of the
    # true rates). The hyperprior's mode keeps the intervals honest.
    rng = np.random.default_rng(seed)
    p = rng.beta(5, 45, 1000)
    k = rng.binomial(2, p)
    assert 0.78 < np.mean(k == 0) < 0.82
    post = beta_posterior(k, 2, *fit_beta_prior(k, 2), level=0.9)
    assert 0.8 <= np.mean((post["lo"] <= p) & (p <= post["hi"])) <= 0.99


def test_fit_beta_prior_rejects_bad_counts():
    with pytest.raises(ValueError):
        fit_beta_prior([0, 0], 0)
    with pytest.raises(ValueError):
        fit_beta_prior([9], 8)


def test_posterior_shrinks_toward_pool_mean_not_half():
    p, k = _beta_binomial_pool(0.6, 1.4, 8, seed=11)  # pool mean 0.3
    a, b = fit_beta_prior(k, 8)
    pool_mean = a / (a + b)
    assert pool_mean == pytest.approx(0.3, abs=0.03)
    post = beta_posterior([0, 4, 8], 8, a, b)
    m0, m4, m8 = post["mean"]
    assert 0 < m0 < pool_mean
    assert pool_mean < m4 < 0.5  # Jeffreys would leave a 4/8 item at exactly 1/2
    assert pool_mean < m8 < 8.5 / 9  # pulled below 1, and further than Jeffreys' pull toward 1/2
    # the winner's-curse fix: 0/8 items' true pass rates average the posterior mean, not the plug-in 0
    assert m0 == pytest.approx(p[k == 0].mean(), abs=0.01)
    assert m8 == pytest.approx(p[k == 8].mean(), abs=0.03)


def test_beta_posterior_columns_interval_and_index():
    post = beta_posterior(pd.Series([0, 3, 8], index=["x", "y", "z"]), 8, 0.5, 0.5, level=0.9)
    assert list(post.columns) == ["alpha", "beta", "mean", "lo", "hi"]
    assert list(post.index) == ["x", "y", "z"]
    assert post["alpha"].tolist() == [0.5, 3.5, 8.5]
    assert post["beta"].tolist() == [8.5, 5.5, 0.5]
    assert post["mean"].tolist() == pytest.approx([0.5 / 9, 3.5 / 9, 8.5 / 9])
    assert ((post["lo"] < post["mean"]) & (post["mean"] < post["hi"])).all()
    wide = beta_posterior([0, 3, 8], 8, 0.5, 0.5, level=0.99)
    assert (wide["hi"] - wide["lo"] > post["hi"].to_numpy() - post["lo"].to_numpy()).all()


# --- expected learnable share under a Beta ----------------------------------------------


@pytest.mark.parametrize("a, b, G", [(0.6, 9.4, 8), (2.0, 3.0, 4), (8.5, 0.5, 16), (1.0, 1.0, 1)])
def test_expected_learnable_beta_matches_monte_carlo(a, b, G):
    p = np.random.default_rng(5).beta(a, b, 400_000)
    mc = predicted_learnable(p, G).mean()
    assert expected_learnable_beta(a, b, G) == pytest.approx(mc, abs=3e-3)


def test_expected_learnable_beta_vectorised_and_validated():
    a, b = np.array([[0.5, 2.0], [3.0, 1.0]]), np.array([[8.5, 2.0], [1.0, 1.0]])
    out = expected_learnable_beta(a, b, 8)
    assert out.shape == (2, 2)
    assert out[0, 1] == pytest.approx(expected_learnable_beta(2.0, 2.0, 8))
    with pytest.raises(ValueError):
        expected_learnable_beta(0.0, 1.0, 8)
    with pytest.raises(ValueError):
        expected_learnable_beta(1.0, 1.0, 0)


def test_posterior_learnable_unchanged():
    # values of the Jeffreys version before it delegated to expected_learnable_beta
    assert posterior_learnable(np.array([0, 1, 4, 8, 3]), np.array([8, 8, 8, 8, 4]), 8) == pytest.approx(
        0.5996200796274038, rel=1e-12
    )
    assert posterior_learnable(np.array([0]), np.array([8]), 16) == pytest.approx(0.41660973031751136, rel=1e-12)
    assert posterior_learnable(np.array([2, 5]), np.array([8, 6]), 4) == pytest.approx(0.5932483315295816, rel=1e-12)


# --- arm-vs-arm differences ---------------------------------------------------------------


def _paired_arms(n, seed):
    rng = np.random.default_rng(seed)
    difficulty = rng.random(n)
    a = (rng.random(n) < 0.4 + 0.5 * difficulty).astype(float)
    b = (rng.random(n) < 0.35 + 0.5 * difficulty).astype(float)
    return a, b


def test_paired_difference_matches_normal_reference_one_seed():
    a, b = _paired_arms(5000, seed=2)
    res = paired_difference_ci(a, b, n_boot=4000, seed=1)
    d = a - b
    half = 100 * 1.959964 * d.std(ddof=1) / math.sqrt(d.size)
    assert res["diff_pts"] == pytest.approx(100 * d.mean())
    assert (res["hi"] - res["lo"]) / 2 == pytest.approx(half, rel=0.1)
    assert (res["lo"] + res["hi"]) / 2 == pytest.approx(100 * d.mean(), abs=0.25 * half)
    assert (res["n_items"], res["seeds_a"], res["seeds_b"]) == (5000, 1, 1)
    assert res["mean_a"] == pytest.approx(a.mean()) and res["mean_b"] == pytest.approx(b.mean())
    # one seed per arm is the plain paired item bootstrap
    ref = paired_bootstrap_gain(b, a, n_boot=4000, seed=1)
    assert (res["lo"], res["hi"]) == pytest.approx((ref["gain_lo"], ref["gain_hi"]), abs=1e-9)


def test_paired_difference_identical_arms_is_zero():
    a, _ = _paired_arms(300, seed=3)
    res = paired_difference_ci(a, a, n_boot=500)
    assert (res["diff_pts"], res["lo"], res["hi"]) == (0.0, 0.0, 0.0)
    mat = np.vstack([a, a, a])
    res = paired_difference_ci(mat, mat, n_boot=500)
    assert res["diff_pts"] == 0.0 and res["lo"] == 0.0 and res["hi"] == 0.0
    assert (res["seeds_a"], res["seeds_b"]) == (3, 3)


def test_paired_difference_seed_variance_widens_interval():
    rng = np.random.default_rng(4)
    base = rng.random(1000)
    b = np.clip(base - 0.05 + 0.1 * rng.random(1000), 0, 1)
    a_seeds = np.vstack([np.clip(base + off, 0, 1) for off in (-0.06, 0.0, 0.06)])
    one = paired_difference_ci(a_seeds.mean(axis=0), b, n_boot=2000, seed=0)
    several = paired_difference_ci(a_seeds, b, n_boot=2000, seed=0)
    assert several["diff_pts"] == pytest.approx(one["diff_pts"])
    assert several["hi"] - several["lo"] > 1.5 * (one["hi"] - one["lo"])
    assert several["lo"] < several["diff_pts"] < several["hi"]
    # seeded, and several seeds on both sides work
    again = paired_difference_ci(a_seeds, np.vstack([b, b]), n_boot=500, seed=9)
    assert again == paired_difference_ci(a_seeds, np.vstack([b, b]), n_boot=500, seed=9)


def test_paired_difference_rejects_misaligned_or_missing():
    with pytest.raises(ValueError):
        paired_difference_ci(np.zeros((2, 10)), np.zeros(11))
    with pytest.raises(ValueError):
        paired_difference_ci([0.0, np.nan], [0.0, 1.0])


# --- verdicts and tiers -----------------------------------------------------------------


@pytest.mark.parametrize(
    "lo, hi, better_is, expected",
    [
        (1.0, 3.0, "higher", "A"),
        (-3.0, -1.0, "higher", "B"),
        (-1.0, 1.0, "higher", "tie"),
        (0.0, 2.0, "higher", "tie"),
        (float("nan"), float("nan"), "higher", "tie"),
        (1.0, 3.0, "lower", "B"),
        (-3.0, -1.0, "lower", "A"),
    ],
)
def test_verdict(lo, hi, better_is, expected):
    assert verdict(lo, hi, better_is=better_is) == expected


def test_verdict_rejects_bad_direction():
    with pytest.raises(ValueError):
        verdict(1.0, 2.0, better_is="bigger")


def test_rank_tiers_shares_ranks_of_indistinguishable_arms():
    means = {"hard": 0.48, "medium": 0.70, "easy": 0.50}
    dist = {("medium", "hard"): True, ("medium", "easy"): True, ("easy", "hard"): False}
    ranks = rank_tiers(means, dist)
    assert ranks == {"medium": 1, "easy": 2, "hard": 2}
    assert list(ranks) == ["medium", "easy", "hard"]  # by rank, then mean
    # either key order
    flipped = {(y, x): v for (x, y), v in dist.items()}
    assert rank_tiers(means, flipped) == ranks
    # nothing distinguishable: everyone first
    assert set(rank_tiers(means, {}).values()) == {1}


def test_rank_tiers_non_transitive_chain_and_lower_is_better():
    means = {"A": 0.6, "B": 0.55, "C": 0.5}
    dist = {("A", "C"): True}  # A~B, B~C, A>C
    assert rank_tiers(means, dist) == {"A": 1, "B": 1, "C": 2}
    assert rank_tiers(means, dist, better_is="lower") == {"C": 1, "B": 1, "A": 2}
    with pytest.raises(ValueError):
        rank_tiers(means, {("A", "Z"): True})

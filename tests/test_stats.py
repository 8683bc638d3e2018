"""Tests for grpo_budget.stats."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from grpo_budget.stats import (
    bootstrap_ci,
    expected_learnable_share,
    learnable_from_log,
    mean_spread,
    paired_bootstrap_gain,
    pass_at_k,
    predicted_learnable,
    relative_gain,
    simulate_learnable,
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

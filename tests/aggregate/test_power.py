"""Tests for grpo_budget.power: variance components, the detectable difference and the seeds an undecided
difference needs, against known answers and a simulation of replicate experiments."""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pytest

from grpo_budget.power import (
    MAX_SEEDS,
    POWER,
    Components,
    detectable_difference,
    difference_variance,
    seeds_needed,
    variance_components,
)
from grpo_budget.stats import paired_difference_ci

Z975 = NormalDist().inv_cdf(0.975)


def _experiments(rng, reps, seeds, n, d, var_w, var_g, var_e):
    """``reps`` replicate experiments of the two-way model (fresh items each): arrays (reps, seeds, n) for A and B,
    A better by ``d`` points."""
    u = rng.normal(0, 0.2, (reps, 1, n))  # item difficulty, shared by both arms
    w = rng.normal(0, math.sqrt(var_w / 2), (reps, 2, 1, n))  # item-by-arm: var(w_A - w_B) = var_w
    g = rng.normal(0, math.sqrt(var_g), (reps, 2, seeds, 1))
    e = rng.normal(0, math.sqrt(var_e), (reps, 2, seeds, n))
    x = 0.5 + u[:, None] + w + g + e
    x[:, 0] += d / 100
    return x[:, 0], x[:, 1]


def test_components_recover_known_variances():
    rng = np.random.default_rng(7)
    var_w, var_g, var_e, n, s = 0.005, 0.0004, 0.04, 4000, 60
    A, B = (M[0] for M in _experiments(rng, 1, s, n, 3.0, var_w, var_g, var_e))
    c = variance_components(A, B)
    assert (c.n_items, c.seeds_a, c.seeds_b) == (n, s, s)
    assert c.item == pytest.approx(var_w, rel=0.1)
    for v in (c.seed_a, c.seed_b):  # one seed's mean over n fixed items: var(g) + var(e) / n
        assert v == pytest.approx(var_g + var_e / n, rel=0.4)  # 59 degrees of freedom: about ±18% sd
    assert c.noise_a == pytest.approx(var_e, rel=0.02) and c.noise_b == pytest.approx(var_e, rel=0.02)


def test_components_by_hand():
    """Two seeds, three items. A's per-seed means 2/3 and 1/3 (variance 1/18); its two-way residuals are ∓1/6, ∓1/6,
    ±1/3 (sum of squares 1/3 over (2-1)(3-1) = 2 degrees of freedom: noise 1/6). B's seeds agree: 0 and 0. The
    per-item difference of seed means (1, -1, 1/2) has variance 13/12, less noise_a / 2 = 1/12: item 1."""
    c = variance_components([[1, 0, 1], [1, 0, 0]], [[0, 1, 0], [0, 1, 0]])
    assert c.seed_a == pytest.approx(1 / 18) and c.seed_b == 0
    assert c.noise_a == pytest.approx(1 / 6) and c.noise_b == pytest.approx(0)
    assert c.item == pytest.approx(1.0)


def test_one_seed_cannot_tell_run_to_run_variance():
    c = variance_components(np.ones((1, 10)), np.zeros((3, 10)))
    assert math.isnan(c.seed_a) and math.isnan(c.item)
    assert math.isnan(detectable_difference(c, 0.95)) and math.isnan(seeds_needed(3.0, c, 0.95))


# Var(D) = 1e4 * (0.01/100 + 0.0004/2 + 0.0002/2) = 1 + 2 + 1 = 4 pts²; z_0.975 + z_0.8 = 1.959964 + 0.841621
HAND = Components(item=0.01, seed_a=0.0004, seed_b=0.0002, noise_a=0.1, noise_b=0.1, n_items=100, seeds_a=2,
                  seeds_b=2)


def test_detectable_difference_by_hand():
    assert POWER == 0.8
    assert difference_variance(HAND) == pytest.approx(4.0)
    assert detectable_difference(HAND, 0.95) == pytest.approx(2.801585 * 2, abs=1e-5)
    assert detectable_difference(HAND, 0.95, seeds=math.inf) == pytest.approx(2.801585, abs=1e-5)  # the item floor
    assert detectable_difference(HAND, 0.95, seeds=8) == pytest.approx(2.801585 * math.sqrt(1.75), abs=1e-5)


def test_bootstrap_variance_by_hand():
    # item 0.01/100; per arm (2/2 - 1/4) * 0.1/100 noise and (1/2 - 1/4) * seed: 1 + 7.5 + 7.5 + 1 + 0.5 pts²
    assert difference_variance(HAND, test="bootstrap") == pytest.approx(17.5)
    # one seed per arm: the plain item bootstrap, var(w) + noise_a + noise_b over n
    assert difference_variance(HAND, seeds=1, test="bootstrap") == pytest.approx(1e4 * 0.21 / 100)
    assert difference_variance(HAND, seeds=math.inf, test="bootstrap") == pytest.approx(1.0)  # the same floor
    assert detectable_difference(HAND, 0.95, test="bootstrap") == pytest.approx(
        1.959964 * math.sqrt(17.5) + 0.841621 * 2, abs=1e-5)
    with pytest.raises(ValueError, match="test must be"):
        difference_variance(HAND, test="exact")


def test_bootstrap_variance_is_the_verdict_intervals_width():
    rng = np.random.default_rng(3)
    for s in (2, 6):
        A, B = (M[0] for M in _experiments(rng, 1, s, 400, 2.0, 0.02, 0.0025, 0.2))
        r = paired_difference_ci(A, B, n_boot=4000, seed=0)
        half = (r["hi"] - r["lo"]) / 2
        assert half == pytest.approx(Z975 * math.sqrt(difference_variance(variance_components(A, B), test="bootstrap")),
                                     rel=0.1)


def test_seeds_needed_by_hand():
    # 3 pts: (3 / 2.801585)² / 1e4 - 0.01/100 = 1.46667e-5 left for the seeds; (0.0004 + 0.0002) / 1.46667e-5 = 40.9
    assert seeds_needed(3.0, HAND, 0.95) == 41 and seeds_needed(-3.0, HAND, 0.95) == 41
    assert seeds_needed(3.5, HAND, 0.95) == 11  # 10.70
    assert seeds_needed(3.5, HAND, 0.99) > 11 and seeds_needed(3.5, HAND, 0.95, power=0.9) > 11


def test_seeds_needed_edge_cases():
    assert math.isnan(seeds_needed(0.0, HAND, 0.95)) and math.isnan(seeds_needed(math.nan, HAND, 0.95))
    assert math.isnan(seeds_needed(4.0, HAND, 0.95))  # decided already: 4 > 1.96 * 2
    assert seeds_needed(2.5, HAND, 0.95) == math.inf  # under the item floor 2.80: more test items needed
    assert seeds_needed(2.805, HAND, 0.95) == math.inf  # just above it: more than MAX_SEEDS (~2400)
    assert seeds_needed(3.0, HAND, 0.95, max_seeds=40) == math.inf and MAX_SEEDS >= 41


def test_seeds_needed_delivers_the_stated_power_in_simulation():
    """With the predicted s* seeds per arm, about POWER of replicate experiments decide the true difference (a 95%
    normal interval excludes 0), with the true variance and with each replicate's own estimate; with s*/2, far
    fewer."""
    var_w, var_g, var_e, n, d = 0.02, 0.0025, 0.2, 200, 8.0
    truth = Components(var_w, var_g + var_e / n, var_g + var_e / n, var_e, var_e, n, 2, 2)
    s_star = seeds_needed(d, truth, 0.95)
    assert s_star == 10
    rng = np.random.default_rng(2024)
    shares = {}
    for s in (int(s_star), int(s_star) // 2):
        A, B = _experiments(rng, 400, s, n, d, var_w, var_g, var_e)
        D = 100 * (A.mean(axis=(1, 2)) - B.mean(axis=(1, 2)))
        se = math.sqrt(difference_variance(truth, s))
        assert D.std() == pytest.approx(se, rel=0.1)  # the variance formula is the replicates' spread
        estimated = np.sqrt([difference_variance(variance_components(a, b)) for a, b in zip(A, B)])
        shares[s] = (float(np.mean(np.abs(D) > Z975 * se)), float(np.mean(np.abs(D) > Z975 * estimated)))
    print("power at s* and s*/2 (true, estimated variance):", shares)
    assert shares[10][0] == pytest.approx(POWER, abs=0.07) and shares[10][1] == pytest.approx(POWER, abs=0.07)
    assert shares[5][0] < POWER - 0.15 and shares[5][1] < POWER - 0.15


def test_bootstrap_seeds_needed_delivers_the_power_of_the_verdicts():
    """The verdicts' bootstrap is wider than Var(D) with many seeds (it counts item noise twice), so it needs more
    seeds than the normal test: at its own s*, about POWER of replicate experiments get a verdict (the 95%
    paired_difference_ci interval excludes 0); at about half of it, clearly fewer."""
    var_w, var_g, var_e, n, d = 0.02, 0.0025, 0.2, 200, 8.0
    truth = Components(var_w, var_g + var_e / n, var_g + var_e / n, var_e, var_e, n, 2, 2)
    s_boot = seeds_needed(d, truth, 0.95, test="bootstrap")
    assert (s_boot, seeds_needed(d, truth, 0.95)) == (13, 10)
    rng = np.random.default_rng(11)
    shares = {}
    for s in (13, 6):
        A, B = _experiments(rng, 200, s, n, d, var_w, var_g, var_e)
        shares[s] = float(np.mean([paired_difference_ci(a, b, n_boot=200, seed=i)["lo"] > 0
                                   for i, (a, b) in enumerate(zip(A, B))]))
    print("verdicts' power at 13 and 6 seeds:", shares)
    assert shares[13] == pytest.approx(POWER, abs=0.07)
    assert shares[6] < POWER - 0.15


def test_components_predict_the_spread_on_binary_scores():
    """0/1 scores (per-item success probability from the same model): the mean predicted Var(D) matches the spread
    of D over replicate experiments."""
    rng = np.random.default_rng(5)
    reps, s, n = 300, 4, 300
    p_item = rng.uniform(0.1, 0.9, (reps, 1, 1, n))
    w = rng.normal(0, 0.08, (reps, 2, 1, n))
    g = rng.normal(0, 0.03, (reps, 2, s, 1))
    p = np.clip(p_item + w + g + np.array([0.03, 0.0])[None, :, None, None], 0, 1)
    x = (rng.random(p.shape) < p).astype(float)
    D = 100 * (x[:, 0].mean(axis=(1, 2)) - x[:, 1].mean(axis=(1, 2)))
    predicted = np.mean([difference_variance(variance_components(a, b)) for a, b in zip(x[:, 0], x[:, 1])])
    assert predicted == pytest.approx(D.var(ddof=1), rel=0.2)

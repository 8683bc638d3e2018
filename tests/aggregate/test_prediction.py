"""The prediction's leave-one-base-model-out bookkeeping on a synthetic map whose answers are worked out by hand,
and a subset's features on hand-made counts."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats as scipy_stats

from grpo_budget.aggregate import prediction
from grpo_budget.learnability import expected_learnable_beta

POLICIES = ["hard", "random", "easy"]
# Per base model: each arm's learnable feature and observed gain, and the arms tied first. On A, B and C the gains
# rise with the learnable feature; on D they fall with it.
MAP = {
    "A": ([0.2, 0.5, 0.8], [1.0, 2.0, 5.0], {"easy"}),
    "B": ([0.6, 0.4, 0.1], [6.0, 3.0, 0.0], {"hard"}),
    "C": ([0.3, 0.9, 0.5], [0.0, 4.0, 2.0], {"random"}),
    "D": ([0.7, 0.5, 0.2], [0.0, 3.0, 6.0], {"easy"}),
}


def synthetic_map(gains: dict | None = None) -> pd.DataFrame:
    rows = []
    for base, (learn, gain, first) in MAP.items():
        gain = (gains or {}).get(base, gain)
        for i, policy in enumerate(POLICIES):
            rows.append({"base": base, "policy": policy, "gain": gain[i], "first": policy in first,
                         "learnable": learn[i], "variance": learn[i], "mean": [0.1, 0.5, 0.9][i], "pool_mean": 0.5})
    return pd.DataFrame(rows)


def test_leave_one_out_hits_and_rank_correlations_by_hand():
    folds = prediction.leave_one_out(synthetic_map())
    f = folds.set_index(["predictor", "base"])
    assert f.loc["learnable", "hit"].tolist() == [1.0, 1.0, 1.0, 0.0]  # D's top arm (hard) is its worst
    assert f.loc["learnable", "spearman"].tolist() == pytest.approx([1.0, 1.0, 1.0, -1.0])
    assert f.loc[("learnable", "A"), "predicted"] == "easy > random > hard"
    assert f.loc[("learnable", "A"), "observed"] == "easy > random > hard"
    assert f.loc["always_hard", "hit"].tolist() == [0.0, 1.0, 0.0, 0.0]
    assert f.loc["always_random", "hit"].tolist() == [0.0, 0.0, 1.0, 0.0]
    assert f.loc[("always_hard", "A"), "predicted"] == "hard > random = easy"
    # A constant baseline's rank correlation, against an independent implementation (average ranks for ties).
    for base, (_, gain, _) in MAP.items():
        want = scipy_stats.spearmanr([1, 0, 0], gain).statistic
        assert f.loc[("always_hard", base), "spearman"] == pytest.approx(want)
    # others_mean, holding A out: hard (6 + 0 + 0) / 3 = 2, random 10 / 3, easy 8 / 3: random first, a miss on A.
    assert f.loc[("others_mean", "A"), "predicted"] == "random > easy > hard"
    assert f.loc[("others_mean", "A"), "hit"] == 0.0
    assert f.loc["learnable", "chance"].tolist() == pytest.approx([1 / 3] * 4) and f.loc["learnable", "decided"].all()
    assert (folds["training_bases"] == 3).all()

    summary = prediction.validation(folds).set_index("predictor")
    assert summary.loc["learnable", ["bases", "hits", "hit_rate", "spearman"]].tolist() == pytest.approx(
        [4, 3, 0.75, 0.5])
    assert summary.loc["always_hard", "hit_rate"] == 0.25 and summary.loc["always_random", "hit_rate"] == 0.25
    ok, why = prediction.beats_baselines(prediction.validation(folds))
    assert ok and "learnable: hit rate 75%, Spearman +0.50" in why


def test_the_held_out_base_model_never_sets_its_own_parameter():
    """Its gains changed at will, a fold's fitted parameter stays what the other base models chose; only its score
    changes."""
    base = prediction.leave_one_out(synthetic_map(), ["tilted", "others_mean"]).set_index(["predictor", "base"])
    flipped = synthetic_map({"D": [9.0, 0.0, -9.0]})
    moved = prediction.leave_one_out(flipped, ["tilted", "others_mean"]).set_index(["predictor", "base"])
    for name in ("tilted", "others_mean"):
        assert moved.loc[(name, "D"), "param"] == base.loc[(name, "D"), "param"]
        train = flipped[flipped["base"] != "D"]
        want = prediction.fit(prediction.PREDICTORS[name], train)
        assert moved.loc[(name, "D"), "param"] == prediction._param_text(want)
    assert moved.loc[("others_mean", "A"), "param"] != base.loc[("others_mean", "A"), "param"]  # D trains A's fold


def test_a_grid_parameter_is_the_one_the_training_folds_rank_best():
    # Gains that rise with the subset's mean pass rate and fall with the learnable feature: lambda = 0 ranks them
    # backwards; lambda = 1 already orders them (hard 0.6 e^-0.4 = 0.40, random 0.50, easy 0.4 e^0.4 = 0.60), as do
    # 3 and 10: the first of the grid's best values (the grid runs from the simplest) is chosen on every fold.
    rows = []
    for base in "PQR":
        for policy, learn, mean, gain in (("hard", 0.6, 0.1, 0.0), ("random", 0.5, 0.5, 1.0), ("easy", 0.4, 0.9, 2.0)):
            rows.append({"base": base, "policy": policy, "gain": gain, "first": policy == "easy",
                         "learnable": learn, "variance": learn, "mean": mean, "pool_mean": 0.5})
    folds = prediction.leave_one_out(pd.DataFrame(rows), ["tilted", "learnable"]).set_index(["predictor", "base"])
    assert folds.loc["tilted", "param"].tolist() == ["1"] * 3
    assert folds.loc["tilted", "hit"].tolist() == [1.0] * 3 and folds.loc["learnable", "hit"].tolist() == [0.0] * 3


def test_too_few_base_models_or_losing_to_a_baseline_is_no_recommendation():
    two = prediction.validation(prediction.leave_one_out(synthetic_map()[lambda t: t["base"].isin(["A", "B"])]))
    ok, why = prediction.beats_baselines(two)
    assert not ok and "2 base model(s); it needs 3" in why
    # Gains reversed on A, B and C as on D: the learnable feature points at the worst arm everywhere (hit rate 0%).
    worse = synthetic_map({"A": [5.0, 2.0, 1.0], "B": [0.0, 3.0, 6.0], "C": [4.0, 0.0, 2.0]})
    worse["first"] = worse.groupby("base")["gain"].transform("max") == worse["gain"]
    ok, why = prediction.beats_baselines(prediction.validation(prediction.leave_one_out(worse)))
    assert not ok and why.startswith("it does not beat always_random and always_hard (learnable: hit rate 0%")


def test_subset_features_by_hand():
    subset = pd.DataFrame({"n_correct": [0, 4, 8], "n_samples": [8, 8, 8], "eb_prior_a": 1.0, "eb_prior_b": 3.0})
    f = prediction.subset_features(subset, G=4)
    a, b = np.array([1.0, 5.0, 9.0]), np.array([11.0, 7.0, 3.0])
    assert f["learnable"] == pytest.approx(np.mean(expected_learnable_beta(a, b, 4)))
    assert f["variance"] == pytest.approx(np.mean(4 * a * b / (12 ** 2 * 13)))
    assert f["mean"] == pytest.approx(np.mean(a / 12))
    assert np.isnan(prediction.subset_features(subset.assign(n_correct=np.nan), 4)["learnable"])

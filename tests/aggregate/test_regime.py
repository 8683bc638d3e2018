"""The regime map: a pool's profile on a hand-made score table, and the map's table and figure on a small synthetic
grid of two base models whose winners are known."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from grpo_budget.aggregate import regime, run
from grpo_budget.experiment import plan

SETTINGS = {"n_boot": 500, "level": 0.95, "seed": 0, "learnable_window": 0.5, "stratify_by": "auto"}
IDS = [f"t{i}" for i in range(20)]


def test_profile_by_hand():
    scores = pd.DataFrame({"n_samples": [8, 8, 8, 4, 16, 0], "n_correct": [0, 8, 3, 0, 4, 0]})
    p = regime.profile(scores)  # the unscored item (0 samples) is left out
    assert p["pool_items"] == 5
    assert p["pool_mean"] == pytest.approx((0 + 1 + 3 / 8 + 0 + 0.25) / 5)
    assert (p["share_zero"], p["share_mixed"], p["share_one"]) == pytest.approx((0.4, 0.4, 0.2))
    assert p["mean_samples"] == pytest.approx(44 / 5)


def _eval(correct: list[int], step: int) -> pd.DataFrame:
    return pd.DataFrame({"id": IDS, "step": step, "n_samples": 1, "n_correct": correct,
                         "accuracy": np.array(correct, float)})


@pytest.fixture()
def grid(tmp_path) -> plan.Listing:
    """Two base models: on `weak` (base 20%, its pool mostly at 0) hard gains nothing and easy gains 60 points;
    on `strong` (base 50%) hard gains 50 points and easy nothing."""
    base = {"weak": [1] * 4 + [0] * 16, "strong": [1] * 10 + [0] * 10}
    final = {("weak", "hard"): base["weak"], ("weak", "easy"): [1] * 16 + [0] * 4,
             ("strong", "hard"): [1] * 20, ("strong", "easy"): base["strong"]}
    pools = {"weak": ([8] * 10, [0] * 8 + [4, 8]), "strong": ([8] * 10, [0, 0, 4, 4, 4, 4, 8, 8, 8, 8])}
    runs, bases, scores = [], [], []
    for model in base:
        _eval(base[model], 0).to_parquet(tmp_path / f"base-{model}.parquet")
        bases.append({"model": model, "evalset": "fa", "path": str(tmp_path / f"base-{model}.parquet")})
        n, k = pools[model]
        pd.DataFrame({"id": [f"p{i}" for i in range(10)], "n_samples": n, "n_correct": k,
                      "pass_rate": np.array(k) / 8}).to_parquet(tmp_path / f"scores-{model}.parquet")
        scores.append({"model": model, "dataset": "fa", "path": str(tmp_path / f"scores-{model}.parquet")})
        for policy in ("hard", "easy"):
            d = tmp_path / f"{model}-{policy}"
            d.mkdir()
            _eval(final[model, policy], 10).to_parquet(d / "fa.parquet")
            j = 0 if policy == "hard" else 9  # the pool's hardest or easiest item, as scored
            pd.DataFrame({"id": [f"p{j}"], "pass_rate": [k[j] / 8], "n_correct": [k[j]], "n_samples": [8],
                          "eb_prior_a": [1.0], "eb_prior_b": [1.0]}).to_parquet(d / "subset.parquet")
            runs.append({"model": model, "dataset": "fa", "policy": policy, "budget": "0.1", "seed": 0,
                         "subset": str(d / "subset.parquet"), "log": str(d / "log.parquet"),
                         "manifest": str(d / "manifest.json"), "evals": {"fa": str(d / "fa.parquet")}})
    return plan.Listing.from_dict({"runs": runs, "base": bases, "scores": scores, "num_generations": 8,
                                   "prompts_per_step": 4, "tests": {"fa": str(tmp_path / "test.parquet")}})


def test_the_map_names_each_base_models_winner(grid):
    from grpo_budget.config.settings import Analysis

    t = regime.regime_table(grid, Analysis.from_dict(SETTINGS))
    assert list(t["model"]) == ["weak", "strong"]  # ordered by the pool's mean pass rate
    weak, strong = t.iloc[0], t.iloc[1]
    assert weak["base_acc"] == pytest.approx(0.2) and strong["base_acc"] == pytest.approx(0.5)
    assert weak["share_zero"] == pytest.approx(0.8) and weak["pool_mean"] == pytest.approx(0.15)
    assert strong["share_mixed"] == pytest.approx(0.4) and strong["share_one"] == pytest.approx(0.4)
    assert (weak["gain_easy"], weak["gain_hard"]) == pytest.approx((60.0, 0.0))
    assert (strong["gain_easy"], strong["gain_hard"]) == pytest.approx((0.0, 50.0))
    assert weak["gain_easy_lo"] > 0 and strong["gain_hard_lo"] > 0
    assert (weak["winners"], weak["first"]) == ("easy", "easy")
    assert (strong["winners"], strong["first"]) == ("hard", "hard")
    assert sorted(regime.policies_in(t)) == ["easy", "hard"]


def test_the_map_table_and_figure_files(grid, tmp_path):
    out = tmp_path / "out"
    run.run("regime", grid, [str(out / f"regime.{x}") for x in ("csv", "md", "html")], SETTINGS)
    md = (out / "regime.md").read_text()
    assert "| weak | 20.0 | 15.0 | 80.0 |" in md and "+60.0 [" in md
    run.run("gain_vs_competence", grid, [str(out / "g.png"), str(out / "g.pdf")], SETTINGS)
    assert (out / "g.png").read_bytes()[:4] == b"\x89PNG"


def test_the_map_is_built_only_with_two_or_more_trained_models():
    from grpo_budget.aggregate.outputs import OUTPUTS

    one = {"models": {"m": {}}}
    two = {"models": {"m": {}, "n": {}, "proxy": {"train": False}}}
    for name in ("regime", "gain_vs_competence"):
        assert not OUTPUTS[name].wanted(one) and OUTPUTS[name].wanted(two)
    assert not OUTPUTS["regime"].wanted({"models": {"m": {}, "proxy": {"train": False}}})


def test_the_map_as_the_prediction_reads_it(grid):
    from grpo_budget.config.settings import Analysis
    from grpo_budget.learnability import expected_learnable_beta

    arms = regime.map_arms(grid, Analysis.from_dict(SETTINGS)).set_index(["model", "policy"])
    assert arms.loc[("weak", "easy"), "base"] == "weak · fa · 0.1" and arms.loc[("weak", "easy"), "first"]
    assert arms.loc[("weak", "easy"), "gain"] == pytest.approx(60.0)
    assert arms.loc[("weak", "hard"), "first"] == False and arms.loc[("strong", "hard"), "first"] == True  # noqa: E712
    # hard bought an item at 0 of 8, easy one at 8 of 8 (under a flat prior): G = 8, the listing's
    assert arms.loc[("weak", "hard"), "learnable"] == pytest.approx(float(expected_learnable_beta(1.0, 9.0, 8)))
    assert arms.loc[("weak", "easy"), "mean"] == pytest.approx(0.9)
    assert arms.loc[("weak", "easy"), "pool_mean"] == pytest.approx(0.15)


def test_the_prediction_table_says_why_two_base_models_recommend_nothing(grid, tmp_path):
    out = tmp_path / "out"
    run.run("prediction", grid, [str(out / f"prediction.{x}") for x in ("csv", "md", "html")], SETTINGS)
    folds = pd.read_csv(out / "prediction.csv")
    assert sorted(folds["base"].unique()) == ["strong · fa · 0.1", "weak · fa · 0.1"]
    assert (folds["training_bases"] == 1).all()
    md = (out / "prediction.md").read_text()
    assert "**No recommendation yet** (predictor `learnable`): validated on 2 base model(s); it needs 3" in md

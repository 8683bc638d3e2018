"""``grpo-budget recommend``: the predicted ranking printed beside a validation that beats the baselines, and the
refusal, with its numbers, beside one that does not."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import TINY, edited_config
from test_prediction import synthetic_map

from grpo_budget import cli
from grpo_budget.aggregate import prediction
from grpo_budget.learnability import expected_learnable_beta
from grpo_budget.select.posterior import with_posterior


@pytest.fixture()
def scored(tmp_path):
    """The tiny config (hard, easy, medium, random at 25%, two seeds) and a hand-made score table of its model:
    eight items never solved, eight always, four at 4 of 8."""
    results = tmp_path / "results"
    cfg = edited_config(TINY, tmp_path / "config.yaml", results=str(results),
                        policies=["hard", "easy", "medium", "random"], budgets=[0.25], seeds=[0, 1])
    k = np.array([0] * 8 + [8] * 8 + [4] * 4)
    table = with_posterior(pd.DataFrame({"id": [f"i{j}" for j in range(20)], "n_samples": 8, "n_correct": k,
                                         "pass_rate": k / 8}))
    (results / "scores" / "tiny").mkdir(parents=True)
    table.to_parquet(results / "scores" / "tiny" / "framearith.parquet")
    return cfg, table


def _folds(tmp_path, gains=None) -> str:
    """A validation file of the synthetic map (with ``gains``: those, each base model's largest alone first)."""
    path = tmp_path / "prediction.csv"
    arms = synthetic_map(gains)
    if gains:
        arms["first"] = arms.groupby("base")["gain"].transform("max") == arms["gain"]
    prediction.leave_one_out(arms).to_csv(path, index=False)
    return str(path)


def test_a_validated_prediction_prints_the_ranking_with_its_numbers(scored, tmp_path, capsys):
    cfg, table = scored
    assert cli.main(["recommend", "--configfile", str(cfg), "--model", "tiny", "--validation", _folds(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("Validation (") and "4 base models held out in turn" in out[0]
    assert "learnable: hit rate 75%, Spearman +0.50; always_random: hit rate 25%" in out[0]
    # medium buys the four items at 4 of 8 and one at 0 or 8 of 8 (alike under this symmetric pool's prior); hard
    # and easy buy five at 0 and five at 8 of 8.
    a = table["eb_prior_a"].iloc[0]
    assert table["eb_prior_b"].iloc[0] == pytest.approx(a)
    edge = float(expected_learnable_beta(a, a + 8, 4))
    medium = (4 * float(expected_learnable_beta(a + 4, a + 4, 4)) + edge) / 5
    line = out[1]
    assert line.startswith(f"tiny · framearith · budget 0.25: medium ({100 * medium:.1f}%) > ")
    assert f"hard ({100 * edge:.1f}%)" in line and f"easy ({100 * edge:.1f}%)" in line
    assert line.endswith("(predicted share of mixed GRPO groups at G = 4)")
    assert out[-1].startswith("Baselines: always_random, always_hard; a predicted top arm was tied first on 75%")


def test_a_prediction_that_loses_to_a_baseline_recommends_nothing(scored, tmp_path, capsys):
    cfg, _ = scored
    losing = _folds(tmp_path, {"A": [5.0, 2.0, 1.0], "B": [0.0, 3.0, 6.0], "C": [4.0, 0.0, 2.0]})
    with pytest.raises(SystemExit) as stop:
        cli.main(["recommend", "--configfile", str(cfg), "--model", "tiny", "--validation", losing])
    assert stop.value.code == 1
    out = capsys.readouterr().out
    assert out.startswith("grpo-budget recommend: cannot recommend yet: the prediction before training (learnable:")
    assert "it does not beat" in out and "learnable: hit rate 0%, Spearman -1.00" in out and "Train the arms" in out
    assert "tiny · framearith" not in out  # no ranking is printed


def test_no_score_table_or_no_such_model_is_one_line(scored, tmp_path, capsys):
    cfg, _ = scored
    (tmp_path / "results" / "scores" / "tiny" / "framearith.parquet").unlink()
    assert cli.main(["recommend", "--configfile", str(cfg), "--model", "tiny", "--validation", _folds(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("grpo-budget: error: ") and "framearith.parquet: no score table; run `snakemake" in err
    assert cli.main(["recommend", "--configfile", str(cfg), "--model", "big", "--validation", _folds(tmp_path)]) == 2
    assert "--model 'big' is not a model of the config; allowed: tiny" in capsys.readouterr().err
    bad = tmp_path / "other.csv"
    pd.DataFrame({"x": [1]}).to_csv(bad, index=False)
    assert cli.main(["recommend", "--configfile", str(cfg), "--model", "tiny", "--validation", str(bad)]) == 2
    assert "not a regime map's prediction table" in capsys.readouterr().err

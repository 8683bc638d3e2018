"""Arms at equal compute: the cost table, the interpolation and the matched-compute verdicts, worked out by hand on
the synthetic results of test_analysis (hard 0.5 with one seed, random 0.5 with two; checkpoints at steps 2 and 4;
8 rollouts of 100 completion tokens per step)."""

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from test_analysis import ANALYSIS, BASE_CORRECT, SETTINGS, synthetic  # noqa: F401  (synthetic: a fixture)

from grpo_budget import stats
from grpo_budget.aggregate import compute, run
from grpo_budget.hardware import DEFAULTS
from grpo_budget.experiment import plan


@pytest.fixture()
def scored(synthetic):  # noqa: F811
    """The synthetic listing with a score table: 4 pool items x 4 samples x 25 tokens = 400 scoring tokens."""
    return replace(synthetic, scores=[plan.ScoreFile("m", "fa", synthetic.runs[0].subset)], model_sizes={"m": 0.5})


def test_a_curve_starts_at_the_base_model_and_pays_scoring_first():
    base, c2, c4 = np.array([0.0, 1.0]), np.array([0.5, 1.0]), np.array([1.0, 1.0])
    xs, ys = compute.curve(base, {4: c4, 2: c2}, scoring=400.0, tokens_by_step={2: 200.0, 4: 400.0})
    assert xs.tolist() == [0, 400, 600, 800]
    assert ys.tolist() == [[0, 1], [0, 1], [0.5, 1], [1, 1]]
    assert compute.at_tokens(xs, ys, 200).tolist() == [0, 1]  # still the base model: scoring is not paid yet
    assert compute.at_tokens(xs, ys, 700).tolist() == [0.75, 1]  # halfway between the two checkpoints
    assert compute.at_tokens(xs, ys, 900).tolist() == [1, 1]
    xs, _ = compute.curve(base, {2: c2}, scoring=0.0, tokens_by_step={2: 200.0})
    assert xs.tolist() == [0, 200]  # an unscored arm trains from the first token


def test_cost_per_arm_charges_scoring_only_to_ranking_policies(scored):
    cost = compute.arm_costs(scored)
    hard = cost[cost["policy"] == "hard"].iloc[0]
    assert (hard["scoring_tokens"], hard["training_tokens"], hard["generated_tokens"]) == (400, 400, 800)
    assert (hard["rollouts_generated"], hard["rollouts_discarded"], hard["discarded_share"]) == (32, 0, 0)
    assert hard["labels_bought"] == 4
    trained = 1200  # TRL's num_tokens: prompt + completion of every rollout, all kept
    assert hard["gpu_hours"] == pytest.approx((800 / DEFAULTS.generate_rate(0.5) + trained / DEFAULTS.train_rate(0.5))
                                              / 3600)
    random = cost[cost["policy"] == "random"]
    assert len(random) == 2 and (random["scoring_tokens"] == 0).all() and (random["generated_tokens"] == 400).all()


def test_matched_compute_reads_every_arm_at_the_tokens_all_reached(scored):
    """random ends at 400 tokens; hard has paid its 400 scoring tokens by then and not trained: still the base."""
    table = compute.matched_compute(scored, ANALYSIS.level, ANALYSIS.n_boot, ANALYSIS.seed)
    fa = table[table["evalset"] == "fa"].iloc[0]
    assert fa["tokens"] == 400 and (fa["arm_a"], fa["arm_b"]) == ("hard @ 0.5", "random @ 0.5")
    base = np.array(BASE_CORRECT) / 2
    random_final = np.stack([base, np.full(8, 0.5)])  # seed 0 ends where the base model is; seed 1 at 0.5
    want = stats.paired_difference_ci(base, random_final, ANALYSIS.n_boot, ANALYSIS.seed, ANALYSIS.level)
    assert fa["acc_a"] == pytest.approx(0.375) and fa["acc_b"] == pytest.approx(0.4375)
    assert (fa["diff_pts"], fa["diff_lo"], fa["diff_hi"]) == pytest.approx((want["diff_pts"], want["lo"], want["hi"]))
    assert fa["verdict"] == {"A": "hard @ 0.5 better", "B": "random @ 0.5 better"}.get(
        stats.verdict(want["lo"], want["hi"]), "not distinguishable")
    # without the scores to pay for, hard is read at its final checkpoint (400 training tokens)
    unscored = compute.matched_compute(replace(scored, scores=[]), ANALYSIS.level, ANALYSIS.n_boot, ANALYSIS.seed)
    assert unscored[unscored["evalset"] == "fa"].iloc[0]["acc_a"] == pytest.approx(0.5625)


def test_cost_matched_compute_and_the_figure_write_their_files(scored, tmp_path):
    for name in ("cost", "matched_compute"):
        outs = [str(tmp_path / f"{name}.{x}") for x in ("csv", "md", "html")]
        run.run(name, scored, outs, SETTINGS)
        assert len(pd.read_csv(outs[0])) > 0
    assert "| hard @ 0.5 | 1 | 400 | 400 | 800 | 0.0% | 4 |" in (tmp_path / "cost.md").read_text()
    assert "All arms read at 400 generated tokens" in (tmp_path / "matched_compute.md").read_text()
    run.run("accuracy_vs_tokens", scored, [str(tmp_path / "a.png")], SETTINGS)
    assert (tmp_path / "a.png").read_bytes()[:4] == b"\x89PNG"


def test_a_log_without_rollout_counts_is_refused_with_what_to_do(synthetic, tmp_path):  # noqa: F811
    pd.DataFrame({"step": [1], "loss": [0.1]}).to_parquet(tmp_path / "old.parquet")
    with pytest.raises(ValueError, match="no rollouts/generated_tokens column.*delete the run's train_log"):
        compute.rollouts(str(tmp_path / "old.parquet"))

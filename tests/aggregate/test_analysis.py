"""The aggregate stage: tables on synthetic Parquet files with answers worked out by hand, the learnable-% reading of
a real trainer log, the figures, and (slow) the tiny workflow end to end with `snakemake --report`."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from dataclasses import replace
from types import SimpleNamespace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from grpo_budget import learnability, power, stats
from grpo_budget.aggregate import gains, learnable, render, run, tiers, verdicts
from grpo_budget.aggregate.run import OUTPUTS, names
from grpo_budget.experiment import config, plan
from grpo_budget.config.settings import Analysis, Training
from grpo_budget.prepare import framearith
from grpo_budget.train import training
from conftest import TINY

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = {"n_boot": 500, "level": 0.95, "seed": 0, "learnable_window": 0.5, "stratify_by": "auto"}
ANALYSIS = Analysis.from_dict(SETTINGS)  # what the tables take; run.run takes the config's dict, as the CLI does

IDS = [f"t{i}" for i in range(8)]
BASE_CORRECT = [2, 2, 1, 0, 1, 0, 0, 0]  # of 2 samples: accuracy 1, 1, .5, 0 | .5, 0, 0, 0 -> 0.375
N_OPS = [1, 1, 1, 1, 2, 2, 2, 2]
# final-step correct counts (of 2) per arm and seed; and the step-2 accuracy
ARMS = {
    ("hard", 0): {"final": [2, 2, 2, 0, 2, 1, 0, 0], "step2": [1] * 8},  # 0.5625 at step 4; 0.5 at step 2
    ("random", 0): {"final": BASE_CORRECT, "step2": [2] * 8},  # no change at the end, 1.0 at step 2
    ("random", 1): {"final": [1] * 8, "step2": [1] * 8},  # 0.5 at both steps
}
OOD_BASE = [0, 1, 2, 4]  # of 4 samples
OOD_FINAL = {("hard", 0): [1, 1, 3, 4], ("random", 0): [0, 1, 2, 4], ("random", 1): [0, 0, 2, 4]}
FRAC_ZERO_STD = [0.5, 0.75, 1.0, 1.0]  # -> learnable 0.5, 0.25, 0, 0
# 8 rollouts of 100 completion tokens per step, none discarded; TRL's running prompt + completion count
ROLLOUTS = {"rollouts/generated": 8, "rollouts/discarded": 0, "rollouts/generated_tokens": 100.0,
            "num_tokens": [300, 600, 900, 1200]}


def _eval(ids, steps_correct: dict[int, list[int]], n: int) -> pd.DataFrame:
    rows = []
    for step, correct in steps_correct.items():
        for i, c in zip(ids, correct):
            rows.append({"id": i, "step": step, "n_samples": n, "n_correct": c, "accuracy": c / n})
    return pd.DataFrame(rows)


@pytest.fixture()
def synthetic(tmp_path) -> dict:
    """A results folder with one model, a training set with an out-of-distribution set, and three runs."""
    r = tmp_path
    (r / "data").mkdir()
    pd.DataFrame({"id": IDS, "prompt": "q", "answer": "1", "n_ops": N_OPS}).to_parquet(r / "data/fa.parquet")
    pd.DataFrame({"id": IDS[:4], "prompt": "q", "answer": "1"}).to_parquet(r / "data/other.parquet")
    (r / "base").mkdir()
    _eval(IDS, {0: BASE_CORRECT}, 2).to_parquet(r / "base/fa.parquet")
    _eval(IDS[:4], {0: OOD_BASE}, 4).to_parquet(r / "base/other.parquet")
    runs = []
    for (policy, seed), arm in ARMS.items():
        d = r / f"{policy}{seed}"
        d.mkdir()
        pd.DataFrame({"id": ["p0", "p1", "p2", "p3"], "pass_rate": [0.0, 0.0, 0.5, 0.5], "n_samples": 4,
                      "n_correct": [0, 0, 2, 2], "mean_completion_tokens": 25.0}).to_parquet(d / "subset.parquet")
        log = pd.DataFrame({"step": [1, 2, 3, 4], "loss": 0.1, "frac_reward_zero_std": FRAC_ZERO_STD,
                            **ROLLOUTS})
        log = pd.concat([log, pd.DataFrame({"step": [4], "train_loss": [0.1]})], ignore_index=True)  # final summary row
        log.to_parquet(d / "log.parquet")
        _eval(IDS, {2: arm["step2"], 4: arm["final"]}, 2).to_parquet(d / "fa.parquet")
        _eval(IDS[:4], {4: OOD_FINAL[(policy, seed)]}, 4).to_parquet(d / "other.parquet")
        runs.append({"model": "m", "dataset": "fa", "policy": policy, "budget": "0.5", "seed": seed,
                     "subset": str(d / "subset.parquet"), "log": str(d / "log.parquet"),
                     "manifest": str(d / "manifest.json"),
                     "evals": {"fa": str(d / "fa.parquet"), "other": str(d / "other.parquet")}})
    return plan.Listing.from_dict(
        {"runs": runs, "num_generations": 2, "prompts_per_step": 4,
         "base": [{"model": "m", "evalset": e, "path": str(r / f"base/{e}.parquet")} for e in ("fa", "other")],
         "scores": [], "tests": {e: str(r / f"data/{e}.parquet") for e in ("fa", "other")}})


def _row(df: pd.DataFrame, **where) -> pd.Series:
    mask = np.ones(len(df), dtype=bool)
    for k, v in where.items():
        mask &= (df[k] == v).to_numpy()
    assert mask.sum() == 1, (where, df)
    return df[mask].iloc[0]


def test_summary_gains_by_hand(synthetic):
    t = gains.summary_table(synthetic, ANALYSIS)
    assert len(t) == 6  # 3 runs x 2 evaluation sets
    hard = _row(t, policy="hard", evalset="fa")
    assert hard["base_acc"] == pytest.approx(0.375) and hard["final_acc"] == pytest.approx(0.5625)
    assert hard["gain_pts"] == pytest.approx(18.75) and hard["rel_gain"] == pytest.approx(0.1875 / 0.625)
    assert (hard["final_step"], hard["best_step"]) == (4, 4) and not hard["ood"]
    assert hard["gain_lo"] <= 18.75 <= hard["gain_hi"]
    g = stats.paired_bootstrap_gain(np.array(BASE_CORRECT) / 2, np.array(ARMS[("hard", 0)]["final"]) / 2,
                                    n_boot=500, seed=0)
    assert (hard["gain_lo"], hard["gain_hi"]) == pytest.approx((g["gain_lo"], g["gain_hi"]))
    random0 = _row(t, policy="random", seed=0, evalset="fa")
    assert random0["gain_pts"] == pytest.approx(0) and random0["best_step"] == 2
    assert random0["best_acc"] == pytest.approx(1.0) and random0["best_gain_pts"] == pytest.approx(62.5)
    assert hard["learnable_pct"] == pytest.approx(100 * 0.1875) and hard["predicted_learnable_pct"] == pytest.approx(25)
    assert _row(t, policy="hard", evalset="other")["ood"]


def test_gains_over_seeds_mean_spread_and_interval(synthetic):
    over = gains.gains_over_seeds(synthetic, ANALYSIS)
    random = _row(over, policy="random", evalset="fa")
    assert random["n_seeds"] == 2 and random["gain_pts"] == pytest.approx(6.25)  # seeds: +0 and +12.5
    assert random["gain_sd"] == pytest.approx(np.std([0, 12.5], ddof=1))
    assert random["final_acc"] == pytest.approx((0.375 + 0.5) / 2)
    assert random["gain_lo"] < 6.25 < random["gain_hi"]
    hard = _row(over, policy="hard", evalset="fa")
    per_seed = _row(gains.summary_table(synthetic, ANALYSIS), policy="hard", evalset="fa")
    assert (hard["gain_lo"], hard["gain_hi"]) == pytest.approx((per_seed["gain_lo"], per_seed["gain_hi"]))
    assert np.isnan(hard["gain_sd"])


def test_two_stage_interval_covers_seed_spread():
    n_boot, seed, level = 1000, 0, 0.95
    same = np.tile(np.array([0, 1] * 50, dtype=float), (3, 1))
    apart = same + np.array([[-0.2], [0.0], [0.2]])
    lo1, hi1 = stats.bootstrap_mean_ci(same, n_boot, seed, level)
    lo2, hi2 = stats.bootstrap_mean_ci(apart, n_boot, seed, level)
    assert lo1 < 0.5 < hi1 and lo2 < 0.5 < hi2
    assert hi2 - lo2 > hi1 - lo1  # the seed-to-seed spread widens the interval


def test_difficulty_by_tier_by_hand(synthetic):
    t = tiers.difficulty_table(synthetic, ANALYSIS)
    fa = t[t["evalset"] == "fa"]
    assert set(fa["stratify_by"]) == {"n_ops"} and set(fa["tier"]) == {"n_ops 1", "n_ops 2"}
    one = _row(fa, policy="hard", tier="n_ops 1")
    two = _row(fa, policy="hard", tier="n_ops 2")
    assert (one["n_items"], one["base_acc"], one["final_acc"]) == (4, pytest.approx(0.625), pytest.approx(0.75))
    assert (two["base_acc"], two["final_acc"], two["gain_pts"]) == (pytest.approx(0.125), pytest.approx(0.375),
                                                                    pytest.approx(25))
    assert two["gain_lo"] <= 25 <= two["gain_hi"]
    # the out-of-distribution set has no metadata: tiers from the base model's per-item accuracy (k of 4)
    other = t[(t["evalset"] == "other") & (t["policy"] == "hard")]
    assert list(other["tier"]) == ["0/4", "1/4", "2/4", "4/4"] and set(other["stratify_by"]) == {"base pass rate"}
    assert list(other["final_acc"]) == pytest.approx([0.25, 0.25, 0.75, 1.0])
    over = tiers.difficulty_table(synthetic, ANALYSIS, over_seeds=True)
    r2 = _row(over, policy="random", evalset="fa", tier="n_ops 2")
    assert r2["n_seeds"] == 2 and r2["final_acc"] == pytest.approx((0.125 + 0.5) / 2)


def test_difficulty_tiers_configurable(synthetic):
    by_rate = tiers.difficulty_table(synthetic, replace(ANALYSIS, stratify_by={"fa": "base_pass_rate"}))
    fa = by_rate[(by_rate["evalset"] == "fa") & (by_rate["policy"] == "hard")]
    assert list(fa["tier"]) == ["0/2", "1/2", "2/2"] and list(fa["n_items"]) == [4, 2, 2]
    assert list(fa["base_acc"]) == pytest.approx([0, 0.5, 1])
    assert list(fa["final_acc"]) == pytest.approx([0.125, 1.0, 1.0])  # t3, t5, t6, t7 | t2, t4 | t0, t1
    with pytest.raises(ValueError, match="no column 'level'"):
        tiers.difficulty_table(synthetic, replace(ANALYSIS, stratify_by="level"))


def test_tiers_quartiles_and_missing():
    test = pd.DataFrame({"id": [f"x{i}" for i in range(12)], "level": [float(i) for i in range(11)] + [np.nan]})
    tier, order, source = tiers.tiers(test, pd.DataFrame(), "auto")
    assert source == "level" and len(order) == 5 and order[-1] == "missing"
    assert tier["x11"] == "missing" and tier["x0"] == order[0] and tier["x10"] == order[3]


def test_learnable_predicted_vs_observed(synthetic):
    t = learnable.learnable_table(synthetic, ANALYSIS)
    row = _row(t, policy="hard")
    assert row["predicted_pct"] == pytest.approx(25)  # p = 0, 0, .5, .5 with G = 2: 1 - p² - (1 - p)² = 0, 0, .5, .5
    assert (row["logged_steps"], row["window_steps"], row["window_groups"]) == (4, 2, 8)  # half of 4 steps, 4 groups each
    assert row["observed_first_pct"] == pytest.approx(37.5) and row["observed_all_pct"] == pytest.approx(18.75)
    assert row["diff_pts"] == pytest.approx(12.5)
    assert row["observed_lo"] < 25 < row["observed_hi"] and row["predicted_in_interval"]
    t3 = learnable.learnable_table(synthetic, replace(ANALYSIS, learnable_window=1))
    assert _row(t3, policy="hard")["observed_first_pct"] == pytest.approx(50)


@pytest.mark.parametrize("mirror", [False, True])
def test_the_prediction_separates_the_arms_of_a_mostly_unsolved_pool(mirror):
    # True pass rates from Beta(5, 45) (mirrored: 1 - that), scored at 2 samples each: about 80% of the items at
    # 0/2 (2/2), and with this seed the likelihood alone collapsed the prior (every arm predicted 52.6%, as on the
    # 12.8% base model). The table's lead prediction (the posterior after 16 new samples per item too) must land
    # near each arm's true share of mixed groups of 8, 1 - p^8 - (1 - p)^8 averaged over its items, and order them.
    from grpo_budget.select import policies
    from grpo_budget.select.posterior import with_posterior

    rng = np.random.default_rng(4)
    p = rng.beta(5, 45, 1000)
    k = rng.binomial(2, p)
    p, k = (1 - p, 2 - k) if mirror else (p, k)
    ids = np.array([f"i{j}" for j in range(1000)])
    pool = with_posterior(pd.DataFrame({"id": ids, "n_correct": k, "n_samples": 2, "pass_rate": k / 2}))
    assert 0.78 < np.mean(k == (2 if mirror else 0)) < 0.82
    fresh = pd.DataFrame({"n_samples": 16, "n_correct": rng.binomial(16, p)}, index=ids)
    predicted, truth = {}, {}
    for arm in ("hard", "easy", "learnable", "random"):
        subset = policies.select(pool, arm, 0.1, seed=0, num_generations=8)
        true_p = p[subset["id"].str[1:].astype(int)]
        truth[arm] = float(np.mean(1 - true_p**8 - (1 - true_p) ** 8))
        predicted[arm] = learnable.predicted_shares(subset, fresh, 8)["all"]
        assert predicted[arm] == pytest.approx(truth[arm], abs=0.03), arm
    low, high = ("hard", "learnable") if not mirror else ("easy", "learnable")
    assert truth[high] - truth[low] > 0.09  # the arms differ by 9 points or more, and so do their predictions:
    assert predicted[high] - predicted[low] == pytest.approx(truth[high] - truth[low], abs=0.02)


def test_window_steps():
    assert learnability.window_steps(60, 0.1) == 6 and learnability.window_steps(6, 0.1) == 1
    assert learnability.window_steps(25, 0.1) == 3  # 2.5 rounds half up
    assert learnability.window_steps(60, 10) == 10 and learnability.window_steps(4, 10) == 4
    assert learnability.window_steps(60, 1.0) == 60 and learnability.window_steps(0, 0.1) == 0


def test_posterior_learnable_matches_monte_carlo():
    rng = np.random.default_rng(0)
    c, n, G = np.array([0, 3, 8]), np.array([8, 8, 8]), 8
    p = rng.beta(c[:, None] + 0.5, n[:, None] - c[:, None] + 0.5, size=(3, 200_000))
    mc = np.mean(1 - p**G - (1 - p) ** G)
    assert learnability.posterior_learnable(c, n, G) == pytest.approx(mc, abs=3e-3)
    assert learnability.posterior_learnable(np.array([0]), np.array([8]), G) > 0.2  # a 0/8 item is not hopeless


def test_ood_pass_at_k_by_hand(synthetic):
    t = tiers.ood_table(synthetic, ANALYSIS)
    assert set(t["evalset"]) == {"other"} and set(t["k"]) == {1, 4}
    p1 = _row(t, policy="hard", k=1)
    assert p1["base_acc"] == pytest.approx((0 + 0.25 + 0.5 + 1) / 4)
    assert p1["final_acc"] == pytest.approx((0.25 + 0.25 + 0.75 + 1) / 4)
    p4 = _row(t, policy="hard", k=4)
    assert p4["base_acc"] == pytest.approx(0.75) and p4["final_acc"] == pytest.approx(1.0)
    assert p4["gain_pts"] == pytest.approx(25)
    k2 = learnability.pass_at_k_items(pd.DataFrame({"n_samples": [4, 4, 4], "n_correct": [0, 1, 2]}), 2)
    assert list(k2) == pytest.approx([0, 1 - math.comb(3, 2) / math.comb(4, 2), 1 - math.comb(2, 2) / math.comb(4, 2)])
    over = tiers.ood_table(synthetic, ANALYSIS, over_seeds=True)
    r4 = _row(over, policy="random", k=4)
    assert r4["n_seeds"] == 2 and r4["final_acc"] == pytest.approx((0.75 + 0.5) / 2)


def test_ood_table_empty_without_ood_sets(synthetic, tmp_path):
    for r in synthetic.runs:
        del r.evals["other"]
    assert tiers.ood_table(synthetic, ANALYSIS).empty
    run.run("ood", synthetic, [str(tmp_path / f"o.{x}") for x in ("csv", "md", "html")], SETTINGS)
    assert "No dataset" in (tmp_path / "o.md").read_text()


def test_curves_have_intervals(synthetic):
    c = gains.curves(synthetic, ANALYSIS)
    fa = c[(c["evalset"] == "fa")]
    base = _row(fa, policy="hard", step=0)
    assert base["accuracy"] == pytest.approx(0.375) and base["lo"] < 0.375 < base["hi"]
    rnd = _row(fa, policy="random", step=4)
    assert rnd["n_seeds"] == 2 and rnd["accuracy"] == pytest.approx((0.375 + 0.5) / 2)
    assert rnd["lo"] <= rnd["accuracy"] <= rnd["hi"]
    assert list(_row(c, policy="hard", evalset="other", step=4)[["step"]]) == [4]  # final-only evaluations


def test_every_output_kind_writes_its_files(synthetic, tmp_path):
    out = tmp_path / "out"
    run.run("summary", synthetic, [str(out / f) for f in ("s.csv", "s.md", "seeds.csv", "s.html")], SETTINGS)
    md = (out / "s.md").read_text()
    assert "| hard | 0.5 | 1 | 37.5 | 56.2 |" in md and "± 8.8" in md and "Largest gain: hard @ 0.5" in md
    lead = render.read_answer(out / "s.md")  # the answer heads the summary, one sentence per budget
    assert lead[0].startswith("**m · fa · budget 0.5:** ") and "bought" in lead[0]
    assert len(pd.read_csv(out / "seeds.csv")) == 4 and "<table" in (out / "s.html").read_text()
    with_full = _with_full(synthetic, tmp_path / "full")  # steps_to_match needs a `full` arm
    for kind in names("table"):
        run.run(kind, with_full, [str(out / f"{kind}.{x}") for x in ("csv", "md", "html")], SETTINGS)
        if kind == "label_free":  # no score tables here: tests/score/test_labelfree.py checks it on some
            assert "No pool here has gold answers" in (out / f"{kind}.md").read_text()
            continue
        if kind == "variant_verdicts":  # no sweep here: tests/experiment/test_sweep.py checks it on one
            assert "(nothing to show)" in (out / f"{kind}.md").read_text()
            continue
        if kind == "drift":  # no drift files here: tests/aggregate/test_drift.py checks it on hand-made ones
            assert "(nothing to show)" in (out / f"{kind}.md").read_text()
            continue
        assert len(pd.read_csv(out / f"{kind}.csv")) > 0 and "<table" in (out / f"{kind}.html").read_text()
    assert "| n_ops 2 | 4 | 12.5 | 37.5 (+25.0) |" in (out / "difficulty.md").read_text()
    assert lead[0] in render.read_answer(out / "verdicts.md")  # the same sentence heads the verdicts
    with pytest.raises(ValueError, match="unknown aggregate output"):
        run.run("figure-nope", synthetic, [str(out / "x.png")], SETTINGS)


def test_figures_png_and_pdf(synthetic, tmp_path):
    synthetic = replace(synthetic, scores=[plan.ScoreFile("m", "fa", synthetic.runs[0].subset)])
    for kind in names("figure"):
        outs = [tmp_path / f"{kind}.png", tmp_path / f"{kind}.pdf"]
        run.run(kind, synthetic, [str(p) for p in outs], SETTINGS)
        assert outs[0].read_bytes()[:4] == b"\x89PNG" and outs[1].read_bytes()[:5] == b"%PDF-"


def test_learnable_from_a_real_trainer_log(tmp_path, tiny_model_dir):
    items = framearith.generate(16, seed=0, width=4, min_ops=1, max_ops=3)
    items["pass_rate"], items["n_samples"], items["n_correct"] = 0.5, 4, 2
    items.to_parquet(tmp_path / "subset.parquet")
    settings = {"num_generations": 4, "prompts_per_step": 4, "max_steps": 4, "save_steps": 4,
                "max_completion_length": 8, "learning_rate": 1e-3, "lora": {"r": 2, "alpha": 4}}
    dataset = {"grading": {"mode": "lenient", "pattern": r"=\s*(-?\d+)"}, "prompt": {"chat_template": False}}
    training.train(tmp_path / "subset.parquet", str(tiny_model_dir), tmp_path / "ck", tmp_path / "log.parquet",
                   tmp_path / "manifest.json", Training.from_dict(settings), dataset, seed=0)
    log = pd.read_parquet(tmp_path / "log.parquet")
    runs = plan.Listing(runs=[plan.RunFiles("m", "d", "random", "16", 0, str(tmp_path / "subset.parquet"),
                                            str(tmp_path / "log.parquet"), str(tmp_path / "manifest.json"), {})],
                        base=[], scores=[], tests={}, num_generations=4, prompts_per_step=4)
    row = learnable.learnable_table(runs, Analysis.from_dict({"learnable_window": 2})).iloc[0]
    frac = log["frac_reward_zero_std"].dropna().to_numpy()
    assert (row["logged_steps"], row["window_steps"], row["window_groups"]) == (4, 2, 8)
    assert row["observed_all_pct"] == pytest.approx(100 * (1 - frac.mean()))
    assert row["observed_first_pct"] == pytest.approx(100 * (1 - frac[:2].mean()))
    assert row["predicted_pct"] == pytest.approx(100 * (1 - 2 * 0.5**4))


# ---------------------------------------------------------------------------------------------------------------
# End to end


def snakemake(*args: str) -> subprocess.CompletedProcess:
    out = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", *args], cwd=ROOT, capture_output=True,
                         text=True)
    assert out.returncode == 0, f"snakemake {' '.join(args)} failed:\n{out.stdout[-3000:]}\n{out.stderr[-6000:]}"
    return out


@pytest.mark.slow
def test_tiny_workflow_tables_figures_and_report(tiny_run, tmp_path):
    results = tiny_run
    args = ("--configfile", str(TINY), "--config", f"results={results}")
    cfg = config.load(TINY)
    figures = [n for n in names("figure") if OUTPUTS[n].wanted(cfg)]
    assert "accuracy_vs_checkpoint" in figures and "gain_vs_setting" not in figures  # no sweep in the tiny config
    for name in figures:
        assert (results / f"figures/{name}.png").read_bytes()[:4] == b"\x89PNG"
        assert (results / f"figures/{name}.pdf").read_bytes()[:5] == b"%PDF-"
    for table in [t for t in names("table") if t != "ood" and OUTPUTS[t].wanted(cfg)]:
        assert len(pd.read_csv(results / f"tables/{table}.csv")) > 0
        assert (results / f"tables/{table}.md").exists() and (results / f"tables/{table}.html").exists()
    assert not (results / "tables/ood.csv").exists()  # the tiny config lists no out-of-distribution sets
    learn = pd.read_csv(results / "tables/learnable.csv")
    assert set(learn["policy"]) == {"hard", "random", "full"} and (learn["window_steps"] == 1).all()  # the default: step 1

    # one table alone, from cached upstream outputs: only its own job runs
    (results / "tables/learnable.csv").unlink()
    text = snakemake(str(results / "tables/learnable.csv"), *args).stderr
    assert "rule table:" in text and "wildcards: name=learnable" in text
    for rule in ("train", "evaluate", "summary", "figure", "score"):
        assert f"rule {rule}:" not in text

    report = tmp_path / "report.html"
    snakemake("--report", str(report), *args)
    page = report.read_text()
    for name in ("accuracy_vs_checkpoint", "learnable_vs_step", "pass_rate_histogram", "accuracy_by_difficulty",
                 "learnable.html", "difficulty.html", "summary.html"):
        assert name in page, name
    for caption in ("Learning curves", "Learnable opportunities", "What each policy bought", "Accuracy by difficulty"):
        assert caption in page, caption
    # It opens on the answer (the workflow description beside the rule graph), and its first category holds the
    # gains and the verdicts as HTML tables; the CSV files come last.
    answer = render.read_answer(results / "summary.md")[0].split(":** ", 1)[1]
    assert "The answer" in page and json.dumps(answer)[1:40] in page
    cats = json.loads(page.split("var categories = ", 1)[1].split(";\n", 1)[0])
    assert sorted(cats)[0] == "1. The answer" and sorted(cats)[-1].startswith("4. Data")
    assert {Path(f).name for sub in cats["1. The answer"].values() for f in sub} == {"summary.html", "verdicts.html"}


def test_verdicts_say_how_many_seeds_would_decide(monkeypatch):
    """Three seeds, 400 items: hard vs random (3 points apart) is undecided and gets the seeds that would decide it,
    as power.seeds_needed computes it for the table's bootstrap; the pairs with easy (20 points below) are decided."""
    rng = np.random.default_rng(0)
    p_item = rng.uniform(0.1, 0.9, 400)

    def arm(shift):
        p = np.clip(p_item + shift + rng.normal(0, 0.02, (3, 1)), 0, 1)
        return {"final": (rng.random((3, 400)) < p).astype(float), "best": np.ones((3, 400)), "base": 0.3,
                "ood": False}

    arms = {"hard": arm(0.03), "random": arm(0.0), "easy": arm(-0.2)}
    monkeypatch.setattr(verdicts, "_arms", lambda runs: {("m", "fa", "fa", "0.5", ""): arms})
    t = verdicts.verdict_table(SimpleNamespace(variants={}), ANALYSIS)
    cols = list(t.columns)
    assert cols[cols.index("verdict") + 1:cols.index("verdict") + 3] == ["detectable_pts", "seeds_needed"]
    assert (t["detectable_pts"] > 0).all()
    tie = _row(t, arm_a="hard", arm_b="random")
    assert tie["verdict"] == "not distinguishable"
    c = power.variance_components(arms["hard"]["final"], arms["random"]["final"])
    assert tie["seeds_needed"] == power.seeds_needed(tie["diff_pts"], c, 0.95, test="bootstrap") > 3
    assert tie["detectable_pts"] == pytest.approx(power.detectable_difference(c, 0.95, test="bootstrap"))
    decided = t[t["arm_b"] == "easy"]
    assert decided["verdict"].str.endswith(" better").all() and decided["seeds_needed"].isna().all()


def test_verdicts_with_one_seed_cannot_size_the_seeds(synthetic, tmp_path):
    out = [str(tmp_path / f"v.{x}") for x in ("csv", "md", "html")]
    run.run("verdicts", synthetic, out, SETTINGS)
    v = pd.read_csv(out[0])
    row = _row(v, evalset="fa")  # hard (1 seed) vs random (2 seeds), 8 items: undecided
    assert row["verdict"] == "not distinguishable" and np.isnan(row["detectable_pts"]) and np.isnan(row["seeds_needed"])
    md = (tmp_path / "v.md").read_text()
    assert "| detectable (pts) | seeds to decide |" in md and "| – | ≥ 2 seeds per arm to estimate |" in md


# ---------------------------------------------------------------------------------------------------------------
# Steps to match the full-data arm; truncated share per difficulty tier

FULL = {0: {4: [2, 2, 1, 0, 1, 1, 0, 0], 8: [2, 2, 2, 1, 2, 1, 0, 0]},  # 0.4375 at step 4, 0.625 at step 8
        1: {4: [2, 2, 1, 0, 1, 1, 0, 0], 8: [2, 2, 2, 1, 2, 1, 0, 0]}}  # two identical seeds


def _with_full(listing: plan.Listing, root: Path, full: dict = FULL, budget: str = plan.FULL_LABEL) -> plan.Listing:
    """The listing plus a `full` arm (by default two seeds, checkpoints 4 and 8) on the in-distribution test set."""
    runs = list(listing.runs)
    for seed, steps in full.items():
        d = root / f"full{seed}"
        d.mkdir(parents=True)
        _eval(IDS, steps, 2).to_parquet(d / "fa.parquet")
        last = max(steps)
        pd.DataFrame({"step": range(1, last + 1), "loss": 0.1, **{k: v for k, v in ROLLOUTS.items() if k != "num_tokens"},
                      "num_tokens": [300 * i for i in range(1, last + 1)]}).to_parquet(d / "log.parquet")
        runs.append(plan.RunFiles("m", "fa", "full", budget, seed, runs[0].subset, str(d / "log.parquet"),
                                  str(d / "manifest.json"), {"fa": str(d / "fa.parquet")}))
    return replace(listing, runs=runs)


def test_steps_to_match_by_hand(synthetic, tmp_path):
    t = verdicts.steps_to_match(_with_full(synthetic, tmp_path), ANALYSIS)
    assert set(t["evalset"]) == {"fa"}  # no full arm tested on `other`
    assert list(zip(t["policy"], t["budget"])) == [("hard", "0.5"), ("random", "0.5")]
    F = np.array([FULL[s][8] for s in (0, 1)]) / 2
    lo, hi = stats.bootstrap_mean_ci(F, 500, 0, 0.95)
    assert lo < 0.5 < 0.625 < hi  # hard's step 2 (0.5) is within the full arm's interval
    hard, rnd = _row(t, policy="hard"), _row(t, policy="random")
    for row in (hard, rnd):
        assert (row["full_final_acc"], row["full_lo"], row["full_hi"]) == pytest.approx((0.625, lo, hi))
        assert (row["full_seeds"], row["full_final_step"], row["n_items"], row["final_step"]) == (2, 8, 8, 4)
    # hard: 0.5 at step 2 already reaches the lower bound
    assert hard["matched"] and hard["match_step"] == 2 and hard["acc_at_match"] == pytest.approx(0.5)
    assert (hard["match_fraction_of_own"], hard["match_fraction_of_full"]) == pytest.approx((2 / 4, 2 / 8))
    assert hard["final_acc"] == pytest.approx(0.5625)
    # random (two seeds): step 2 (1.0 + 0.5) / 2 = 0.75, step 4 (0.375 + 0.5) / 2
    assert rnd["seeds"] == 2 and rnd["match_step"] == 2 and rnd["final_acc"] == pytest.approx(0.4375)
    assert json.loads(rnd["checkpoint_acc"]) == pytest.approx({"2": 0.75, "4": 0.4375})


def test_steps_to_match_never_and_other_budgets(synthetic, tmp_path):
    # a stronger full arm: every item right at step 4 -> interval [1, 1]; no arm gets there
    strong = {0: {2: [1] * 8, 4: [2] * 8}}
    t = verdicts.steps_to_match(_with_full(synthetic, tmp_path, strong), ANALYSIS)
    assert (t["full_lo"] == 1.0).all() and not t["matched"].any()
    for col in ("match_step", "match_fraction_of_own", "match_fraction_of_full", "acc_at_match"):
        assert t[col].isna().all()
    out = [str(tmp_path / f"m.{x}") for x in ("csv", "md", "html")]
    run.run("steps_to_match", _with_full(synthetic, tmp_path / "again", strong), out, SETTINGS)
    md = (tmp_path / "m.md").read_text()
    assert "| hard | 0.5 | 1 | 4 | 56.2 | never | – | – | – | 2: 50.0 · 4: 56.2 |" in md
    assert "Full data (full, 1 seed, step 4): 100.0% [100.0, 100.0]" in md
    # the reference is the `full` arm with budget label `all`
    assert verdicts.steps_to_match(_with_full(synthetic, tmp_path / "b", budget="0.5"), ANALYSIS).empty


def test_steps_to_match_writes_the_match(synthetic, tmp_path):
    out = [str(tmp_path / f"s.{x}") for x in ("csv", "md", "html")]
    run.run("steps_to_match", _with_full(synthetic, tmp_path), out, SETTINGS)
    md = (tmp_path / "s.md").read_text()
    assert "| hard | 0.5 | 1 | 4 | 56.2 | 2 | 50% | 25% | 50.0 | 2: 50.0 ✓ · 4: 56.2 |" in md
    assert "Full data (full, 2 seeds, step 8): 62.5%" in md and "<table" in (tmp_path / "s.html").read_text()
    assert len(pd.read_csv(tmp_path / "s.csv")) == 2


def test_steps_to_match_empty_without_a_full_arm(synthetic, tmp_path):
    t = verdicts.steps_to_match(synthetic, ANALYSIS)
    assert t.empty and {"full_final_acc", "full_lo", "match_step", "match_fraction_of_full"} <= set(t.columns)
    out = [str(tmp_path / f"e.{x}") for x in ("csv", "md", "html")]
    run.run("steps_to_match", synthetic, out, SETTINGS)
    assert "has no `full` arm" in (tmp_path / "e.md").read_text()
    assert list(pd.read_csv(tmp_path / "e.csv").columns) == list(t.columns)


def test_difficulty_truncated_share_per_tier(synthetic, tmp_path):
    t = tiers.difficulty_table(synthetic, ANALYSIS)
    assert t["truncated_share"].isna().all() and t["base_truncated_share"].isna().all()  # no n_truncated column
    base = _eval(IDS, {0: BASE_CORRECT}, 2).assign(n_truncated=[0, 0, 1, 2, 0, 0, 1, 1])
    base.to_parquet(synthetic.base[0].path)
    cut = {("hard", 0): [0, 0, 0, 0, 1, 1, 1, 1], ("random", 0): [0] * 8, ("random", 1): [2, 0, 0, 0, 0, 0, 0, 0]}
    for r in synthetic.runs:
        ev = pd.read_parquet(r.evals["fa"])
        ev["n_truncated"] = 0
        ev.loc[ev["step"] == 4, "n_truncated"] = cut[(r.policy, r.seed)]
        ev.to_parquet(r.evals["fa"])
    t = tiers.difficulty_table(synthetic, ANALYSIS)
    hard1, hard2 = _row(t, policy="hard", evalset="fa", tier="n_ops 1"), _row(t, policy="hard", evalset="fa", tier="n_ops 2")
    assert (hard1["base_truncated_share"], hard1["truncated_share"]) == pytest.approx((3 / 8, 0))  # of 4 items × 2
    assert (hard2["base_truncated_share"], hard2["truncated_share"]) == pytest.approx((2 / 8, 4 / 8))
    assert np.isnan(_row(t, policy="hard", evalset="other", tier="0/4")["truncated_share"])  # files without it
    over = tiers.difficulty_table(synthetic, ANALYSIS, over_seeds=True)
    assert _row(over, policy="random", evalset="fa", tier="n_ops 1")["truncated_share"] == pytest.approx(2 / 16)
    out = [str(tmp_path / f"d.{x}") for x in ("csv", "md", "html")]
    run.run("difficulty", synthetic, out, SETTINGS)
    md = (tmp_path / "d.md").read_text()
    assert ("| tier | items | base % | hard @ 0.5 | random @ 0.5 | base truncated % | hard @ 0.5 truncated % "
            "| random @ 0.5 truncated % |") in md
    # n_ops 1: hard 2, 2, 2, 0 of 2; random 2, 2, 1, 0 and 1, 1, 1, 1 -> 56.2; truncated 3 of 8, 0 of 8, 2 of 16
    assert "| n_ops 1 | 4 | 62.5 | 75.0 (+12.5) | 56.2 (-6.2) | 37.5 | 0.0 | 12.5 |" in md
    assert "| 0/4 | 1 | 0.0 | 25.0 (+25.0) | 0.0 (+0.0) | – | – | – |" in md
    assert {"truncated_share", "base_truncated_share"} <= set(pd.read_csv(tmp_path / "d.csv").columns)


def test_the_summary_names_the_rewards_each_arm_trained_with(synthetic, tmp_path):
    from grpo_budget.aggregate.render_arms import rewards_note

    assert rewards_note(synthetic) == "Rewards: 1 × correct, every arm."  # no rewards in a manifest: today's
    runs = []
    for i, r in enumerate(synthetic.runs):
        path = tmp_path / f"manifest-{i}.json"
        path.write_text(json.dumps({"rewards": {"correct": 1.0, "format": 0.1} if r.policy == "hard" else
                                    {"correct": 1.0}}))
        runs.append(replace(r, manifest=str(path)))
    note = rewards_note(replace(synthetic, runs=runs))
    assert note.startswith("Rewards: ") and "hard @ 0.5: 1 × correct + 0.1 × format" in note
    out = [str(tmp_path / f) for f in ("s.csv", "s.md")]
    run.run("summary", replace(synthetic, runs=runs), out, SETTINGS)
    assert "0.1 × format" in (tmp_path / "s.md").read_text()


def test_every_figure_orders_its_panels_as_the_config_lists_models_and_datasets():
    """zeta before alpha (config order, not alphabetical); a training set's own test set before its ood set."""
    from grpo_budget.aggregate.read import panel_order

    def run(model, dataset, evals):
        return SimpleNamespace(model=model, dataset=dataset, evals=dict.fromkeys(evals, ""))

    runs = SimpleNamespace(runs=[run("zeta", "fa", ["ood", "fa"]), run("alpha", "fa", ["fa"]), run("zeta", "gsm", ["gsm"])],
                           scores=[SimpleNamespace(model="proxy", dataset="fa")])
    panels = [("alpha", "fa", "fa"), ("zeta", "gsm", "gsm"), ("zeta", "fa", "ood"), ("zeta", "fa", "fa")]
    assert panel_order(runs, [(p, None) for p in panels]) == [
        (("zeta", "fa", "fa"), None), (("zeta", "fa", "ood"), None), (("alpha", "fa", "fa"), None),
        (("zeta", "gsm", "gsm"), None)]
    pairs = [("proxy", "fa"), ("zeta", "gsm"), ("alpha", "fa"), ("zeta", "fa")]  # (model, dataset) panels
    assert panel_order(runs, pairs, key=lambda p: p) == [("zeta", "fa"), ("alpha", "fa"), ("zeta", "gsm"),
                                                          ("proxy", "fa")]

"""End to end, for real: a pool without answers through prepare, score and select (training then needs the bought
items' answers), and configs/label-free-cpu.yaml's arms selected by labels, agreement and a proxy side by side."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from grpo_budget.prepare import splits

ROOT = Path(__file__).resolve().parents[1]

sys.path.insert(0, str(Path(__file__).parent))
from conftest import TINY, edited_config, inputs_from  # noqa: E402
from test_inputs_workflow import planned  # noqa: E402
from test_workflow import snakemake  # noqa: E402


@pytest.mark.slow
def test_unlabeled_pool_is_selected_by_agreement_and_training_needs_the_bought_answers(tmp_path):
    cfg = yaml.safe_load(TINY.read_text())
    ds = cfg["datasets"]["framearith"]
    pool = splits.build(dict(ds, seed=ds.get("seed", 0)))["pool"]  # the same seeded pool prepare will build
    answers = tmp_path / "answers.csv"
    ds["answers"] = str(answers)
    pool[["id", "answer"]].iloc[:20].to_csv(answers, index=False)  # 20 of 200: the subset (40) cannot be covered
    cfg.update(policies=["hard@agreement"], results=str(tmp_path / "results"))
    cfg["scoring"]["verify_samples"] = 0
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    r = tmp_path / "results"
    run = r / "runs/tiny/framearith/hard@agreement/b0.2/s0"

    out = snakemake(str(run / "manifest.json"), "--configfile", str(path), check=False)
    assert out.returncode != 0
    prepared = pd.read_parquet(r / "data/framearith/pool.parquet")
    assert prepared["answer"].isna().all() and len(prepared) == 200  # withheld at prepare
    assert pd.read_parquet(r / "data/framearith/test.parquet")["answer"].notna().all()  # the test set keeps its own
    scores = pd.read_parquet(r / "scores/tiny/framearith.parquet")
    assert scores["pass_rate"].isna().all() and scores["n_correct"].isna().all()
    assert scores["agreement"].between(0, 1).all() and (scores["n_agree"] <= scores["n_samples"]).all()
    subset = pd.read_parquet(run / "subset.parquet")
    assert len(subset) == 40 and (subset["scoring_labels"] == 0).all() and subset["answer"].isna().all()
    assert (subset["difficulty_source"] == "agreement").all()
    log = (r / "logs/train/tiny_framearith_hard@agreement_b0.2_s0.log").read_text()
    missing = sorted(set(subset["id"]) - set(pool["id"].iloc[:20]))
    assert f"have no gold answer in the answers file {answers}" in log and missing[0] in log
    assert "Traceback" not in log  # one line, no traceback: a user's mistake

    pool[["id", "answer"]].to_csv(answers, index=False)  # the answers bought: now every selected item has one
    snakemake("--configfile", str(path))  # the whole workflow, aggregates included, on the unlabeled pool
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["labels_bought"] == {"scoring": 0, "training": 40, "total": 40}
    summary = pd.read_csv(r / "summary.csv")
    assert list(summary["labels_bought"]) == [40] and summary["subset_mean_pass_rate"].isna().all()
    assert (r / "figures/pass_rate_histogram.png").exists() and (r / "tables/learnable.md").exists()

    bought = pool[["id", "answer"]].assign(answer=lambda f: f["answer"].where(~f["id"].isin(subset["id"][:1]), "-1"))
    bought.to_csv(answers, index=False)  # one bought answer corrected: training reads it, nothing before it does
    jobs = planned("--configfile", str(path))
    assert jobs["train"] == 1 and not {"prepare", "score", "select"} & set(jobs)


@pytest.mark.slow
def test_label_free_cpu_config_arms_side_by_side(embedded_default_run, tmp_path):
    """configs/label-free-cpu.yaml: learnable by labels, by agreement and by a weaker proxy, with the calibration
    table and the labels each arm bought (training shortened to 10 steps of 8 prompts). Its pool, test set and
    trained model are the embedded default's (same task, seed and bootstrap settings), copied from that run; the
    proxy is bootstrapped here, for 100 steps."""
    r = inputs_from(embedded_default_run, tmp_path / "results", ("data", "models/tiny"))
    # a quarter of its training steps of half its prompts, and a proxy stopped at 100 of its bootstrap steps (the
    # config's reaches its 0.15 at about step 440, 63 s): what is checked here is selection
    cfg = yaml.safe_load((ROOT / "configs" / "label-free-cpu.yaml").read_text())
    weak = cfg["models"]["tiny-weak"]
    weak["bootstrap"]["max_steps"] = 100
    path = edited_config(ROOT / "configs" / "label-free-cpu.yaml", tmp_path / "label-free-cpu.yaml",
                         training={"max_steps": 10, "save_steps": 5, "prompts_per_step": 8},
                         models={"tiny-weak": weak})
    snakemake("--configfile", str(path), "--config", f"results={r}")
    cal = pd.read_csv(r / "tables/label_free.csv")
    rho = cal[cal["measure"] == "rho"].set_index("source")
    assert set(rho.index) == {"agreement", "answer_entropy", "proxy", "proxy_agreement"}
    assert rho["value"].notna().all() and (rho["lo"] <= rho["value"]).all() and (rho["value"] <= rho["hi"]).all()
    assert rho.loc["agreement", "value"] > 0  # more agreement, easier: the signal points the right way
    assert not (r / "base/tiny-weak").exists()  # the proxy is scored, never trained or evaluated
    assert (r / "scores/tiny-weak/framearith.parquet").exists()
    seeds = pd.read_csv(r / "tables/gains_over_seeds.csv").set_index("policy")
    assert seeds.loc["learnable@agreement", "labels_bought"] == 100  # the budget, and nothing for scoring
    assert seeds.loc["learnable", "labels_bought"] == 1000 == seeds.loc["learnable@proxy", "labels_bought"]
    verdicts = pd.read_csv(r / "tables/verdicts.csv")
    pairs = {frozenset((a, b)) for a, b in zip(verdicts["arm_a"], verdicts["arm_b"])}
    assert frozenset(("learnable", "learnable@agreement")) in pairs

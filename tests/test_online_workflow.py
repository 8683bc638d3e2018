"""configs/online-cpu.yaml end to end, for real, with a quarter of its training steps of half its prompts: offline
selection against online filtering (dynamic sampling) on the embedded default's task, each arm's cost, the verdicts
at matched compute, and seeds needed; then adding a seed plans only the new seed's jobs."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "online-cpu.yaml"

sys.path.insert(0, str(Path(__file__).parent))
from conftest import edited_config, inputs_from  # noqa: E402
from test_inputs_workflow import planned  # noqa: E402
from test_workflow import snakemake  # noqa: E402

PROMPTS = 8  # half the config's training.prompts_per_step (16)
STEPS = 10  # a quarter of the config's 40 (two checkpoints, 5 steps apart): the test's minutes go to training


def shortened(folder: Path, seeds: list[int]) -> Path:
    """The config with STEPS training steps of PROMPTS prompts and these seeds, written to ``folder``."""
    return edited_config(CONFIG, folder / f"online-{len(seeds)}-seeds.yaml", seeds=seeds,
                         training={"max_steps": STEPS, "save_steps": STEPS // 2, "prompts_per_step": PROMPTS})


@pytest.fixture(scope="module")
def online_run(embedded_default_run, tmp_path_factory) -> Path:
    """The config run once, shortened; its pool, test set and base model are the embedded default's (the same task,
    seed and bootstrap settings), copied from that run so that the base model is not trained twice."""
    base = tmp_path_factory.mktemp("online")
    r = inputs_from(embedded_default_run, base / "results")
    snakemake("--configfile", str(shortened(base, [0, 1])), "--config", f"results={r}")
    return r


@pytest.mark.slow
def test_dynamic_arms_train_only_on_mixed_groups_and_count_what_they_discard(online_run):
    logs = sorted(online_run.glob("runs/tiny/framearith/*/b*/s*/v-*/train_log.parquet"))
    assert len(logs) == 12  # learnable, random, full x dynamic off, on x 2 seeds
    for path in logs:
        log = pd.read_parquet(path).dropna(subset=["rollouts/generated"])
        assert len(log) == STEPS and (log["rollouts/kept"] == 8 * PROMPTS).all()
        assert (log["rollouts/generated"] == log["rollouts/kept"] + log["rollouts/discarded"]).all()
        if "dynamic-on" in str(path):
            # every group trained on has mixed rewards, except the ones a capped step filled in
            filled = log["rollouts/filled_groups"]
            assert ((1 - log["rollouts/kept_mixed_share"]) * PROMPTS - filled).abs().max() < 1e-9
            assert log["rollouts/discarded"].sum() > 0 and (log["rollouts/rounds"] <= 5).all()
        else:
            assert (log["rollouts/discarded"] == 0).all() and (log["rollouts/rounds"] == 1).all()


@pytest.mark.slow
def test_cost_matched_compute_figure_and_seeds_needed(online_run):
    cost = pd.read_csv(online_run / "tables/cost.csv")
    assert len(cost) == 12
    scored = cost.set_index(["policy", "variant", "seed"])["scoring_tokens"]
    assert (scored.loc["learnable"] > 0).all()  # the only arm that ranked by the scores pays for them
    assert (scored.loc["random"] == 0).all() and (scored.loc["full"] == 0).all()
    on = cost[cost["variant"] == "dynamic-on"]
    assert (on["discarded_share"] > 0).all() and (cost[cost["variant"] == "dynamic-off"]["discarded_share"] == 0).all()
    assert (cost["gpu_hours"] > 0).all() and (cost["labels_bought"] > 0).all()

    matched = pd.read_csv(online_run / "tables/matched_compute.csv")
    assert len(matched) == 15  # every pair of the 6 arms, whatever their budget or variant
    assert matched["tokens"].nunique() == 1 and matched["tokens"].iloc[0] <= cost["generated_tokens"].min()
    assert ((matched["diff_lo"] <= matched["diff_pts"]) & (matched["diff_pts"] <= matched["diff_hi"])).all()
    assert "All arms read at" in (online_run / "tables/matched_compute.md").read_text()
    assert (online_run / "figures/accuracy_vs_tokens.png").read_bytes()[:4] == b"\x89PNG"

    verdicts = pd.read_csv(online_run / "tables/verdicts.csv")
    assert verdicts["detectable_pts"].notna().all() and "seeds_needed" in verdicts


@pytest.mark.slow
def test_adding_a_seed_plans_only_the_new_seeds_jobs(online_run, tmp_path):
    assert yaml.safe_load(CONFIG.read_text())["seeds"] == [0, 1]
    jobs = planned("--configfile", str(shortened(tmp_path, [0, 1, 2])), "--config", f"results={online_run}")
    assert jobs.get("train") == 6 and jobs.get("evaluate") == 6 and jobs.get("select") == 3
    assert not {"prepare", "bootstrap_model", "score", "evaluate_base"} & set(jobs)

"""The cost plan: work per job from the config and the grid, rates fitted from benchmark files, runtime requests."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from grpo_budget import cli
from grpo_budget.cluster import cost, work
from grpo_budget.hardware import CPU_DEFAULTS, DEFAULT_SOURCE, DEFAULTS, defaults_for
from grpo_budget.cluster.rates import fit_rates, measurements
from grpo_budget.experiment import config
from grpo_budget.config.settings import Cost
from conftest import TINY

ROOT = Path(__file__).resolve().parents[2]


def load(path=TINY, results=None, **sections):
    cfg = config.load(path)
    cfg["results"] = str(results or "/tmp/never-written")
    for key, value in sections.items():
        cfg[key] = dict(cfg[key], **value)
    return cfg


def by_rule(jobs):
    out = {}
    for j in jobs:
        out.setdefault(j.rule, []).append(j)
    return out


def test_jobs_follow_the_grid_and_count_their_work():
    cfg = load()
    jobs = by_rule(work.jobs(cfg))
    counts = {rule: len(js) for rule, js in jobs.items()}
    assert counts["train"] == counts["evaluate"] == counts["select"] == 3  # hard, random, full at one seed
    assert counts["score"] == counts["verify"] == counts["evaluate_base"] == counts["bootstrap_model"] == 1
    assert counts["prepare"] == 2
    (score,) = jobs["score"]
    assert score.gen_tokens == 200 * 4 * 16  # pool x K x max_new_tokens
    for train in jobs["train"]:
        assert train.steps == 6 and train.train_tokens == 6 * 8 * 4 * 16  # steps x prompts x G x tokens
    for ev in jobs["evaluate"]:
        assert ev.gen_tokens == 2 * 60 * 2 * 16  # checkpoints 3 and 6 x test items x samples x tokens
    (verify,) = jobs["verify"]
    assert verify.sequences == 200 * 4  # full selects the whole pool: every item once
    assert {j.name for j in jobs["train"]} == {"tiny_framearith_hard_b0.2_s0", "tiny_framearith_random_b0.2_s0",
                                              "tiny_framearith_full_ball_s0"}


def test_adaptive_scoring_counts_its_maximum():
    cfg = load(scoring={"adaptive": {"first": 4, "step": 4, "max_samples": 12}})
    (score,) = by_rule(work.jobs(cfg))["score"]
    assert score.sequences == 200 * 12
    capped = load(scoring={"adaptive": {"max_samples": 32, "mean_samples": 6.5}})
    (score,) = by_rule(work.jobs(capped))["score"]
    assert score.sequences == 200 * 7  # the total cap, rounded up per item


def test_drift_adds_one_scoring_job_per_arm_on_its_subset():
    """analysis.drift: one job per trained arm, its subset at the scoring's samples, on the arm's critical path."""
    assert "drift" not in by_rule(work.jobs(load()))  # off by default: the plan is what it was
    cfg = load(analysis={"drift": True})
    drift = {j.name: j for j in by_rule(work.jobs(cfg))["drift"]}
    assert set(drift) == {j.name for j in by_rule(work.jobs(cfg))["train"]}
    assert drift["tiny_framearith_hard_b0.2_s0"].gen_tokens == 40 * 4 * 16  # 20% of 200 items x K x max_new_tokens
    assert drift["tiny_framearith_full_ball_s0"].sequences == 200 * 4
    assert all(j.run == name and j.kind == "generate" for name, j in drift.items())
    adaptive = load(analysis={"drift": True}, scoring={"adaptive": {"first": 4, "step": 4, "max_samples": 12}})
    assert by_rule(work.jobs(adaptive))["drift"][0].sequences == 40 * 12  # as many as the score job, at most
    est = cost.estimate(cfg, folders=[])
    est.loc[est["rule"] == "drift", "seconds"] = 1e6  # a drift job longer than anything else: the critical path
    assert cost.critical_path_s(est) > 1e6
    assert cost.runtime_minutes(cfg, "drift", dict(model="tiny", dataset="framearith", policy="hard", budget="0.2",
                                                   seed="0")) == Cost.from_dict(cfg["cost"]).runtime_floor


def test_epochs_and_checkpoints_set_steps_and_evaluations():
    cfg = load(training={"epochs": 2.0, "checkpoints": 4})
    jobs = by_rule(work.jobs(cfg))
    train = {j.name: j for j in jobs["train"]}
    assert train["tiny_framearith_hard_b0.2_s0"].steps == 2 * (40 // 8)  # 40 items, 8 prompts per step
    assert train["tiny_framearith_full_ball_s0"].steps == 2 * (200 // 8)
    ev = {j.name: j for j in jobs["evaluate"]}
    assert ev["tiny_framearith_full_ball_s0_framearith"].sequences == 4 * 60 * 2


def test_paper_configs_plan_every_job_of_their_dag():
    for name, n in (("hard-examples", 170), ("difficulty-limits", 280)):  # the dry runs' counts, less `all`
        jobs = work.jobs(load(ROOT / "configs" / f"{name}.yaml"))
        assert len(jobs) == n, name
    sizes = {j.model: j.size_b for j in work.jobs(load(ROOT / "configs" / "hard-examples.yaml"))
             if j.rule == "train"}
    assert sizes == {"qwen3-4b": 4, "qwen3-14b": 14, "phi-4": 14, "llama-3.1-8b": 8}


def test_bootstrapped_model_size_from_its_architecture():
    assert work.model_size_b(load(), "tiny") == pytest.approx(1.05e-3, rel=0.05)  # the "~1M-parameter" Llama


def test_default_rates_fall_with_model_size_and_decode_is_memory_bound_in_small_batches():
    hw = DEFAULTS
    assert hw.generate_rate(4) > hw.generate_rate(8) > hw.generate_rate(14)
    assert hw.train_rate(4) > hw.train_rate(14)
    # one sequence: a step reads the weights once, so a batch of 8 costs the same step time
    assert hw.decode_step(8, 1) == hw.decode_step(8, 8)
    assert hw.generate_rate(8, 8) == pytest.approx(8 * hw.generate_rate(8, 1))


def fake_run(folder: Path, cfg: dict, seconds) -> None:
    """A results folder as a finished run leaves it: plan/jobs.csv and one benchmark file per job."""
    cfg = dict(cfg, results=str(folder))
    work.write_jobs(cfg)
    for j in work.jobs(cfg):
        path = folder / work.benchmark_path(j)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"s\th:m:s\tmax_rss\n{seconds(j):.2f}\t0:00:00\t100\n")


def test_rates_fitted_from_benchmark_files_predict_the_jobs_they_came_from(tmp_path):
    cfg = load()
    # generation: 5 s startup + 0.05 s per decoding step + 1/2,000 s per token; CPU rules: 3 s
    def seconds(j):
        return 3.0 if j.kind == "cpu" else 5.0 + 0.05 * j.passes + j.work / 2000

    fake_run(tmp_path / "run", cfg, seconds)
    rates = fit_rates(measurements([str(tmp_path / "run")]))
    gen = rates[("generate", work.model_size_b(cfg, "tiny"))]
    assert (gen.startup, gen.per_pass, gen.per_token) == pytest.approx((5.0, 0.05, 1 / 2000), rel=0.02)
    est = cost.estimate(cfg, folders=[str(tmp_path / "run")])
    for row in est[est["kind"] != "train"].itertuples():
        job = work.Job(**{k: getattr(row, k) for k in work.Job.__dataclass_fields__})
        assert row.seconds == pytest.approx(seconds(job), rel=0.02)
    assert set(est[est["kind"] == "generate"]["source"]) == {"fit to 6 measured"}


def test_training_time_splits_by_its_log(tmp_path):
    cfg = load()
    fake_run(tmp_path, cfg, lambda j: 30.0 if j.rule == "train" else 4.0 + j.work / 1000)
    for j in work.jobs(cfg):
        if j.rule == "train":
            log = tmp_path / j.train_log
            log.parent.mkdir(parents=True, exist_ok=True)
            pd.DataFrame({"resumed_from": [0, 0], "step": [6, 6], "reward": [0.5, None],
                          "train_runtime": [None, 20.0]}).to_parquet(log)
    rates = fit_rates(measurements([str(tmp_path)]))
    rate = rates[("train", work.model_size_b(cfg, "tiny"))]
    # one work level: the loop splits as this machine's generation does (here all per token: 4 s + tokens/1000)
    gen = rates[("generate", work.model_size_b(cfg, "tiny"))]
    assert gen.per_pass == pytest.approx(0, abs=1e-9) and gen.per_token == pytest.approx(1e-3)
    assert (rate.startup, rate.per_pass, rate.per_token) == pytest.approx((10.0, 0.0, 20.0 / 3072), abs=1e-9)
    assert rate.source == "3 measured, split by their logs"
    alone = fit_rates(measurements([str(tmp_path)]).query("kind == 'train'"))
    # without generation jobs: all per decoding step (6 steps x 16 tokens)
    assert alone[("train", work.model_size_b(cfg, "tiny"))].per_pass == pytest.approx(20.0 / 96)


def test_generation_time_splits_by_its_log_lines(tmp_path):
    """A generation job's log says how long it generated (scoring.sample_and_grade): startup is the rest."""
    cfg = load()
    fake_run(tmp_path, cfg, lambda j: 3.0 if j.kind == "cpu" else 40.0 if j.kind == "train" else
             7.0 + 0.01 * j.passes + j.work / 4000)
    for j in work.jobs(cfg):
        if j.kind == "generate":
            log = tmp_path / "logs" / j.rule / f"{j.name}.log"
            log.parent.mkdir(parents=True, exist_ok=True)
            busy = 0.01 * j.passes + j.work / 4000
            log.write_text("".join(f"INFO grpo_budget.score.scoring: generated 8 completions in {busy / 2:.6f} s\n"
                                   for _ in range(2)))
    rate = fit_rates(measurements([str(tmp_path)]))[("generate", work.model_size_b(cfg, "tiny"))]
    assert (rate.startup, rate.per_pass, rate.per_token) == pytest.approx((7.0, 0.01, 1 / 4000), rel=0.01)
    assert rate.source == "6 measured, split by their logs"


def test_unmeasured_sizes_take_the_stated_defaults(tmp_path):
    est = cost.estimate(load(ROOT / "configs" / "hard-examples.yaml"), folders=[str(tmp_path)])
    gpu = est[est["kind"] != "cpu"]
    assert set(gpu["source"]) == {DEFAULT_SOURCE}
    train = gpu[gpu["rule"] == "train"].groupby("model")["seconds"].max()
    assert train["qwen3-4b"] < train["llama-3.1-8b"] < train["qwen3-14b"] == train["phi-4"]


def test_a_cpu_config_is_planned_in_cpu_hours_at_cpu_rates():
    """device: cpu runs the GPU rules on the CPU: neither A100 rates nor GPU-hours (issue 44)."""
    cfg = load()
    assert cfg["device"] == "cpu"
    est = cost.estimate(cfg, folders=[])
    assert set(est[est["kind"] != "cpu"]["source"]) == {CPU_DEFAULTS.source} == {"default (CPU, 2 cores)"}
    text = cost.render(cost.summarize(est), est, device="cpu")
    assert "| CPU-h |" in text and "GPU" not in text.replace("GPU rules", "")
    assert "device: cpu: the GPU rules run on the CPU, so their hours are CPU hours" in text
    on_gpu = cost.estimate(dict(cfg, device="cuda"), folders=[])
    assert set(on_gpu[on_gpu["kind"] != "cpu"]["source"]) == {DEFAULT_SOURCE}
    # one sequence of the 135M model perf/cpu_rates.py measures: ~14 tokens/s on the CPU, ~5,800 on an A100
    assert CPU_DEFAULTS.generate_rate(0.135, 1) < DEFAULTS.generate_rate(0.135, 1) / 100


def test_scoring_time_grows_with_the_pool():
    """A pool 100 times larger: its score job decodes 78 times the steps (batches of 128 prompts), at the same
    per-step cost, so its time beyond the start-up grows as much; on the CPU that is most of the job."""
    def score(**ds):
        cfg = load(datasets={"framearith": dict(load()["datasets"]["framearith"], **ds)})
        est = cost.estimate(cfg, folders=[])
        job = est[est["rule"] == "score"].iloc[0]
        return job.seconds - defaults_for(cfg["device"]).startup(job.size_b), job.seconds, job.passes

    small, big = score(), score(pool_size=20_000)
    assert (small[2], big[2]) == (32, 2512)  # 200 and 20,000 items, 128 a batch, 16 tokens
    assert big[0] == pytest.approx(small[0] * 2512 / 32)
    assert big[1] > 4 * small[1]


def test_runtime_request_is_the_estimate_with_margin_floor_and_ceiling():
    c = Cost.from_dict({})
    assert (c.margin, c.runtime_floor, c.runtime_ceiling) == (1.5, 15, 2880)
    assert cost.request_minutes(3600, c) == 90
    assert cost.request_minutes(10, c) == 15
    assert cost.request_minutes(10 ** 6, c) == 2880
    tight = Cost.from_dict({"margin": 1.2, "runtime_floor": 1, "runtime_ceiling": 600})
    assert cost.request_minutes(100 * 60, tight) == 120


def test_runtime_minutes_of_a_job_from_its_wildcards():
    cfg = load(ROOT / "configs" / "hard-examples.yaml")
    est = cost.estimate(cfg, folders=[])
    row = est[(est["rule"] == "train") & (est["name"] == "qwen3-14b_gsm8k_hard_b0.1_s0")].iloc[0]
    wc = dict(model="qwen3-14b", dataset="gsm8k", policy="hard", budget="0.1", seed="0")
    assert cost.runtime_minutes(cfg, "train", wc) == math.ceil(row.seconds * 1.5 / 60)
    assert cost.runtime_minutes(cfg, "evaluate", dict(wc, evalset="aime2025")) >= 15


def test_plan_command_prints_and_writes_the_table(tmp_path, capsys):
    assert cli.main(["plan", "--configfile", str(TINY), "--config", f"results={tmp_path}", "--parallel", "2"]) == 0
    out = capsys.readouterr().out
    assert "| train | train | 3 |" in out and "CPU-h" in out and "Wall time" in out  # tiny.yaml: device cpu
    assert (tmp_path / "plan" / "cost.md").read_text() in out
    per_job = pd.read_csv(tmp_path / "plan" / "cost.csv")
    assert len(per_job) == len(work.jobs(load(results=tmp_path)))
    assert (tmp_path / "plan" / "jobs.csv").exists()


def test_a_two_axis_sweeps_jobs_get_their_own_estimates():
    """The variants are named in the sweep's key order (G16-beta0.04): the estimates keep it, so each job finds its
    own (sorting the config's keys once named them beta0.04-G16, and every job fell back to the ceiling)."""
    cfg = load(ROOT / "configs" / "sweep-group-kl.yaml")
    est = cost.estimate(cfg, folders=[])
    row = est[(est["rule"] == "train") & est["name"].str.endswith("_v-G16-beta0.04")].iloc[0]
    model, dataset, policy, budget, seed = row["name"].split("_v-")[0].split("_")
    wc = dict(model=model, dataset=dataset, policy=policy, budget=budget[1:], seed=seed[1:], variant="G16-beta0.04")
    assert cost.runtime_minutes(cfg, "train", wc) == cost.request_minutes(row.seconds, Cost.from_dict(cfg["cost"]))


def test_the_plan_counts_the_rows_of_local_files_and_warns_once(tmp_path, caplog, monkeypatch):
    """Issue 55: a 150-row file borrowing gsm8k's name was planned as GSM8K's 7,473 items, with no warning; arc's
    unknown size was warned about 12 times, advising a setting validation refuses."""
    import json
    import logging

    from own_data import word_problems

    rows = [{"question": r["prompt"], "answer": r["solution"].replace("The answer is ", "#### ")}
            for r in word_problems(170)]
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[:150]))
    (tmp_path / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[150:]))
    cfg = config.load(TINY)
    cfg["results"] = str(tmp_path / "results")
    cfg["models"] = {"m": {"path": "org/model"}}
    cfg["datasets"] = {
        "mine": {"source": "benchmark", "benchmark": "gsm8k", "seed": 0, "ood": [], "eval_only": False,
                 "spec": {"data_files": {"train": str(tmp_path / "train.jsonl"), "test": str(tmp_path / "test.jsonl")}}},
        "own": {"source": "files", "answer_type": "number", "seed": 0, "ood": [], "eval_only": False,
                "spec": {"data_files": str(tmp_path / "train.jsonl"), "test_fraction": 0.2,
                         "fields": {"question": "question", "answer": "answer"}}},
        "hub": {"source": "benchmark", "benchmark": "arc", "seed": 0, "ood": [], "eval_only": False}}
    cfg = config.validate(cfg)
    assert (work.split_items(cfg, "mine", "pool"), work.split_items(cfg, "mine", "test")) == (150, 20)
    assert (work.split_items(cfg, "own", "pool"), work.split_items(cfg, "own", "test")) == (120, 30)
    monkeypatch.setattr(work, "WARNED", set())
    with caplog.at_level(logging.WARNING, logger=work.__name__):
        jobs = work.jobs(cfg)
    warned = [r.getMessage() for r in caplog.records if "cannot tell how many items" in r.getMessage()]
    assert len(warned) == 2 and {"pool split", "test split"} == {w.split("its ")[1].split(" (")[0] for w in warned}
    assert "spec.pool_size" not in warned[0] and "spec.max_items" in warned[0]
    scores = {j.dataset: j for j in jobs if j.rule == "score"}
    assert scores["mine"].sequences == 150 * 4 and scores["own"].sequences == 120 * 4  # pool items x K

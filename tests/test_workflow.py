"""End to end: the Snakemake workflow on a small config and on the embedded default, for real."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from grpo_budget.aggregate.render import read_answer
from grpo_budget.io import read_parquet
from grpo_budget.lock import LOCK_FILE
from conftest import TINY

ROOT = Path(__file__).resolve().parents[1]


def snakemake(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    out = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", *args], cwd=ROOT, capture_output=True, text=True)
    if check and out.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed:\n{out.stdout[-3000:]}\n{out.stderr[-6000:]}")
    return out


def log(out: subprocess.CompletedProcess) -> str:
    return out.stdout + out.stderr


def test_lint_is_clean():
    out = subprocess.run([sys.executable, "-m", "snakemake", "--lint"], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, log(out)
    assert "Lints for" not in log(out)


def test_dry_run_job_counts():
    out = snakemake("-n", "--configfile", str(TINY), "--config", "results=/tmp/never-written")
    counts = {line.split()[0]: int(line.split()[1]) for line in out.stdout.splitlines()
              if len(line.split()) == 2 and line.split()[1].isdigit()}
    assert counts["train"] == 3 and counts["evaluate"] == 3 and counts["select"] == 3
    assert counts["prepare"] == 2 and counts["score"] == 1 and counts["evaluate_base"] == 1
    assert counts["figure"] == 6 and counts["table"] == 6 and counts["summary"] == 1 and counts["verify"] == 1
    assert counts["bootstrap_model"] == 1


def test_a_pools_prepare_job_reads_the_test_tables_of_its_ood_sets():
    """A pool is checked for shared prompts against the out-of-distribution sets its arms are evaluated on."""
    out = snakemake("-n", "-p", "--configfile", str(ROOT / "configs/hard-examples.yaml"), "--config",
                    "results=/tmp/never-written")
    pool = next(line for line in out.stdout.splitlines() if "--out pool=/tmp/never-written/data/gsm8k/" in line)
    assert "--against /tmp/never-written/data/aime2025/test.parquet >" in pool


@pytest.mark.slow
def test_every_output_exists_with_columns_and_sane_values(tiny_run):
    r = tiny_run
    pool = pd.read_parquet(r / "data/framearith/pool.parquet")
    test = pd.read_parquet(r / "data/framearith/test.parquet")
    assert len(pool) == 200 and len(test) == 60
    assert {"id", "prompt", "answer", "answer_type", "n_ops"} <= set(pool.columns)
    assert (r / "models/tiny/config.json").exists() and (r / "models/tiny/calibration.json").exists()

    scores = pd.read_parquet(r / "scores/tiny/framearith.parquet")
    assert {"id", "samples", "correct", "pass_rate", "n_format_fail", "mean_completion_tokens", "n_ops"} <= set(scores.columns)
    assert scores["pass_rate"].between(0, 1).all() and (scores["n_samples"] == 4).all()
    assert (scores["pass_rate"] == scores["n_correct"] / 4).all()
    # empirical Bayes: posterior means inside their intervals, ties at 0/K lifted off 0 toward the pool
    assert (scores["pass_rate_eb_lo"] <= scores["pass_rate_eb"]).all() and (scores["pass_rate_eb"] <= scores["pass_rate_eb_hi"]).all()
    zero = scores[scores["n_correct"] == 0]["pass_rate_eb"]
    assert zero.empty or (zero.between(0, scores["pass_rate"].mean(), inclusive="neither")).all()
    fresh = pd.read_parquet(r / "verify/tiny/framearith.parquet")
    assert (fresh["n_samples"] == 4).all() and len(fresh) == 200  # full selects the whole pool

    for policy, size in (("hard", 40), ("random", 40), ("full", 200)):
        run = r / f"runs/tiny/framearith/{policy}/b{'all' if policy == 'full' else '0.2'}/s0"
        subset = pd.read_parquet(run / "subset.parquet")
        assert len(subset) == size and {"id", "rank", "pass_rate", "prompt", "answer"} <= set(subset.columns)
        if policy == "hard":
            assert subset["pass_rate"].max() <= scores["pass_rate"].sort_values().iloc[size - 1]
        log = pd.read_parquet(run / "train_log.parquet")
        assert {"step", "reward", "frac_reward_zero_std"} <= set(log.columns)
        ev = pd.read_parquet(run / "eval/framearith.parquet")
        assert sorted(ev["step"].unique()) == [3, 6]
        assert ev["accuracy"].between(0, 1).all() and len(ev) == 2 * 60
        assert not list(run.glob("**/*.tmp"))

    base = pd.read_parquet(r / "base/tiny/framearith.parquet")
    assert (base["step"] == 0).all() and len(base) == 60

    summary = pd.read_csv(r / "summary.csv")
    assert len(summary) == 3 and set(summary["policy"]) == {"hard", "random", "full"}
    assert summary["base_acc"].between(0, 1).all() and (summary["gain_lo"] <= summary["gain_hi"]).all()
    md = (r / "summary.md").read_text()
    assert "| hard | 0.2 |" in md and "| full | all |" in md
    assert read_answer(r / "summary.md")[0].startswith("**tiny · framearith · budget")
    train_log = next((r / "logs/train").glob("*.log")).read_text()  # the console shows jobs; each log its command
    assert train_log.startswith("grpo-budget: command: grpo-budget --record-out ") and " train " in train_log
    verdicts = pd.read_csv(r / "tables/verdicts.csv")
    assert len(verdicts) == 1 and set(verdicts[["arm_a", "arm_b"]].iloc[0]) == {"hard", "random"}  # one budget each
    learn = pd.read_csv(r / "tables/learnable.csv")
    assert (learn["predicted_from"] == "all").all() and learn["predicted_fresh_pct"].between(0, 100).all()
    assert learn["predicted_all_pct"].between(0, 100).all()
    for name in ("accuracy_vs_checkpoint", "learnable_vs_step", "pass_rate_histogram", "arm_differences"):
        png = r / f"figures/{name}.png"
        assert png.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.slow
def test_second_run_does_nothing_and_one_figure_reruns_alone(tiny_run):
    args = ("--configfile", str(TINY), "--config", f"results={tiny_run}")
    out = snakemake(*args)
    assert "Nothing to be done" in log(out)
    fig = tiny_run / "figures/learnable_vs_step.png"
    fig.unlink()
    out = snakemake(str(fig), *args)
    text = log(out)
    assert "rule figure:" in text or "localrule figure:" in text
    for rule in ("train", "evaluate", "score", "summary", "bootstrap_model"):
        assert f"rule {rule}:" not in text
    assert fig.exists()


@pytest.mark.slow
def test_a_deleted_intermediate_is_rebuilt_by_the_plain_command(tiny_run):
    """A missing evaluation file whose consumers are up to date: the plain command re-runs the job whose input is
    gone, which rebuilds exactly that evaluation (no training); its readers' error also names the file as a target."""
    from grpo_budget.errors import UserError
    from grpo_budget.io import read_parquet

    args = ("--configfile", str(TINY), "--config", f"results={tiny_run}")
    evals = sorted(tiny_run.glob("runs/*/*/*/*/*/eval/*.parquet"))
    target = evals[0]
    target.unlink()
    with pytest.raises(UserError, match=f"rebuild it with `snakemake {target} --configfile YOUR_CONFIG`"):
        read_parquet(target)
    text = log(snakemake(*args))
    assert f"its input {target} is missing; re-running it" in text
    assert text.count("rule evaluate:") == 1 and "rule train:" not in text and target.exists()
    assert "rule summary:" in text


@pytest.mark.slow
def test_a_failed_jobs_cause_is_on_the_console(tiny_run):
    """An evaluation table edited since evaluate wrote it (readable, other numbers): the summary job that reads it
    sets it aside and fails in one line, which the console shows beside the log path; the same command rebuilds it."""
    args = ("--configfile", str(TINY), "--config", f"results={tiny_run}")
    target = tiny_run / "runs/tiny/framearith/hard/b0.2/s0/eval/framearith.parquet"
    pd.read_parquet(target).assign(accuracy=1.0).to_parquet(target, index=False)
    out = snakemake(str(tiny_run / "summary.csv"), *args, "--rerun-triggers", "mtime", "--forcerun", "summary",
                    check=False)
    assert out.returncode != 0
    assert (f"cause ({tiny_run}/logs/aggregate/summary.log): grpo-budget: error: {target} does not match the sha256 "
            "recorded when its job wrote it") in log(out)
    assert not target.exists() and target.with_name(f"{target.name}.mismatch-1").exists()
    assert not (tiny_run / LOCK_FILE).exists()  # released on error too
    text = log(snakemake(*args))
    assert text.count("rule evaluate:") == 1 and "rule train:" not in text
    assert read_parquet(target)["accuracy"].lt(1).any()


@pytest.mark.slow
def test_a_results_folder_in_use_refuses_a_second_run_before_any_job(tiny_run):
    args = ("--configfile", str(TINY), "--config", f"results={tiny_run}")
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        (tiny_run / LOCK_FILE).write_text(json.dumps({"host": socket.gethostname(), "pid": other.pid, "cwd": "/x"}))
        before = (tiny_run / "summary.csv").stat().st_mtime_ns
        out = snakemake(str(tiny_run / "summary.csv"), *args, "--forcerun", "summary", check=False)
        assert out.returncode != 0 and f"this results folder is in use by another run (pid {other.pid} on" in log(out)
        assert (tiny_run / "summary.csv").stat().st_mtime_ns == before  # no job ran, nothing was deleted
    finally:
        other.kill()
        other.wait()
    assert "rule summary:" in log(snakemake(str(tiny_run / "summary.csv"), *args, "--forcerun", "summary"))
    assert not (tiny_run / LOCK_FILE).exists()  # its holder was gone: taken over, then released


@pytest.mark.slow
def test_embedded_default_end_to_end(embedded_default_run):
    """The README's main command on the embedded default: calibrated base model, adaptive scoring, 5 policies +
    base, report."""
    results = embedded_default_run  # run once per session (conftest): tests/generation/test_vllm.py reuses it
    scores = pd.read_parquet(results / "scores/tiny/framearith.parquet")
    # adaptive scoring: unequal counts, as many samples in all as K=8, every sample kept
    assert scores["n_samples"].nunique() > 2 and scores["n_samples"].sum() <= 8 * len(scores)
    assert (scores["samples"].map(len) == scores["n_samples"]).all()
    assert not (results / "scores/tiny/framearith.parquet.rounds").exists()
    inside = ((scores["pass_rate"] > 0) & (scores["pass_rate"] < 1)).mean()
    assert inside >= 0.3, f"only {inside:.0%} of pool items strictly between 0 and 1"
    assert (scores["pass_rate"] == 0).any() and (scores["pass_rate"] == 1).any()
    summary = pd.read_csv(results / "summary.csv")
    assert set(summary["policy"]) == {"easy", "medium", "hard", "learnable", "random"}
    # the subsets really differ in difficulty, in the order the policies promise
    by = summary.groupby("policy")["subset_mean_pass_rate"].mean()
    assert by["hard"] < by["medium"] < by["easy"]
    # the answer: every pair of the five policies, over two seeds each
    verdicts = pd.read_csv(results / "tables/verdicts.csv")
    assert len(verdicts) == 10 and (verdicts["seeds_a"] == 2).all() and (verdicts["seeds_b"] == 2).all()
    assert (verdicts["diff_lo"] <= verdicts["diff_pts"]).all() and (verdicts["diff_pts"] <= verdicts["diff_hi"]).all()
    learn = pd.read_csv(results / "tables/learnable.csv")
    assert (learn["predicted_from"] == "all").all()
    assert "learnable" in set(learn["policy"])


README_FIGURES = "<!-- embedded-default figures"  # the README's marker before its table of measured figures


def readme_figures(text: str) -> dict[str, dict[str, str]]:
    """The README's table of the embedded default's figures, by processor: {processor: {column: cell}}."""
    lines = text.split(README_FIGURES, 1)[1].splitlines()[1:]
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in lines[:20] if line.startswith("|")]
    head, body = rows[0], rows[2:]
    return {r[0]: dict(zip(head[1:], r[1:])) for r in body}


def processor() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def test_the_readme_figures_parse():
    table = readme_figures((ROOT / "README.md").read_text())
    assert table and all({"base", "easy", "hard", "random"} <= set(row) for row in table.values())


@pytest.mark.slow
def test_the_readme_quotes_what_the_embedded_default_gives_on_this_processor(embedded_default_run):
    """The README's figures of the embedded default, measured at the commit that carries them, equal this run's where
    this machine's processor is one the README names (the same processor gives the same numbers: docs/results.md);
    elsewhere the test says what this processor gave, so the README can be brought up to date."""
    over = pd.read_csv(embedded_default_run / "tables/gains_over_seeds.csv")
    over = over[~over["ood"].astype(bool)]
    got = {"base": f"{100 * over['base_acc'].iloc[0]:.1f}%"}
    for _, r in over.iterrows():
        got[r["policy"]] = f"{r['gain_pts']:+.1f} [{r['gain_lo']:+.1f}, {r['gain_hi']:+.1f}]".replace("-", "−")
    quoted = readme_figures((ROOT / "README.md").read_text())
    mine = processor()
    if mine not in quoted:
        pytest.skip(f"the README quotes no figures for this processor ({mine}); this run gave {got}")
    assert quoted[mine] == got, f"README's figures for {mine} differ from this run's: {quoted[mine]} vs {got}"

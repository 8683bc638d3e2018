"""The cost plan: every job's estimated time (its work, :mod:`grpo_budget.cluster.work`, at its rate,
:mod:`grpo_budget.cluster.rates`), the plan's tables, and the runtime a cluster job asks for.

A GPU rule's SLURM ``runtime`` is the estimate x ``cost.margin``, between ``cost.runtime_floor`` and
``cost.runtime_ceiling`` minutes.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import asdict
from functools import lru_cache
from pathlib import Path

import pandas as pd

from grpo_budget.hardware import defaults_for
from grpo_budget.cluster.rates import fit_rates, measurements, rate_for
from grpo_budget.experiment.rules import RULES, job_name
from grpo_budget.cluster.work import jobs, write_jobs
from grpo_budget.config.settings import Cost
from grpo_budget.io import write_text

log = logging.getLogger(__name__)


def calibration_folders(config: dict) -> list[str]:
    """Results folders whose measurements count: the config's own and ``cost.calibrate_from``."""
    return list(dict.fromkeys([config["results"], *Cost.from_dict(config.get("cost")).calibrate_from]))


def estimate(config: dict, folders: list[str] | None = None) -> pd.DataFrame:
    """Per job: rule, stage, work, estimated seconds and the source of its rate (unmeasured: the defaults of the
    config's device)."""
    job_list = jobs(config)
    rates = fit_rates(measurements(calibration_folders(config) if folders is None else folders))
    hw = defaults_for(config["device"])
    rows = []
    for j in job_list:
        r = rate_for(j, rates, hw)
        rows.append(dict(asdict(j), stage=j.stage, kind=j.kind, work=j.work, seconds=r.seconds(j),
                         source=r.source))
    return pd.DataFrame(rows)


def critical_path_s(est: pd.DataFrame) -> float:
    """The longest chain of dependent jobs: bootstrap, score, then per arm train and its slowest evaluation or its
    drift job (or the verification), then the aggregates -- the wall time with a GPU for every job that can run."""
    def total(rule, **match):
        rows = est[est["rule"] == rule]
        for k, v in match.items():
            rows = rows[rows[k] == v]
        return float(rows["seconds"].max()) if len(rows) else 0.0

    boot = total("bootstrap_model")
    prep = total("prepare")
    longest = 0.0
    for (m, d), _ in est[est["rule"] == "score"].groupby(["model", "dataset"]):
        score = total("score", model=m, dataset=d) + total("select")
        arms = est[(est["rule"] == "train") & (est["model"] == m) & (est["dataset"] == d)]
        arm = max([row.seconds + max(total("evaluate", run=row.run), total("drift", run=row.run))
                   for row in arms.itertuples()], default=0.0)
        longest = max(longest, score + max(arm, total("verify", model=m, dataset=d)))
    aggregate = total("summary") + total("table") + total("figure")
    return prep + boot + longest + aggregate


def summarize(est: pd.DataFrame) -> pd.DataFrame:
    """Per rule: jobs, tokens generated and trained, GPU-hours, mean and longest job, rate source."""
    rows = []
    order = list(RULES)
    for rule in sorted(est["rule"].unique(), key=order.index):
        r = est[est["rule"] == rule]
        gpu = RULES[rule].gpu
        rows.append({
            "stage": RULES[rule].stage, "rule": rule, "jobs": len(r),
            "tokens_generated": int(r["gen_tokens"].sum()), "tokens_trained": int(r["train_tokens"].sum()),
            "gpu_hours": float(r["seconds"].sum() / 3600) if gpu else 0.0,
            "job_hours": float(r["seconds"].sum() / 3600),
            "mean_job_min": float(r["seconds"].mean() / 60), "max_job_min": float(r["seconds"].max() / 60),
            "rate_source": "; ".join(sorted(set(r["source"]))),
        })
    return pd.DataFrame(rows)


def _fmt_tokens(n: int) -> str:
    for unit, div in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= div:
            return f"{n / div:.1f}{unit}"
    return str(n) if n else "–"


def _fmt_hours(h: float) -> str:
    return f"{h:.2f}" if h < 10 else f"{h:.0f}"


def render(summary: pd.DataFrame, est: pd.DataFrame, parallel: int | None = None, device: str = "cuda") -> str:
    """The plan as a Markdown table with totals and wall-time lines; on device cpu the GPU rules' hours are CPU
    hours, and the plan says so."""
    unit = "GPU" if device == "cuda" else "CPU"
    lines = [f"| stage | rule | jobs | tokens generated | tokens trained | {unit}-h | mean job (min) "
             "| longest job (min) | rates |",
             "|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for r in summary.itertuples():
        lines.append(f"| {r.stage} | {r.rule} | {r.jobs} | {_fmt_tokens(r.tokens_generated)} | "
                     f"{_fmt_tokens(r.tokens_trained)} | {_fmt_hours(r.gpu_hours) if r.gpu_hours else '–'} | "
                     f"{r.mean_job_min:.1f} | {r.max_job_min:.1f} | {r.rate_source} |")
    gpu_h = summary["gpu_hours"].sum()
    all_h = summary["job_hours"].sum()
    lines.append(f"| **total** | | **{summary['jobs'].sum()}** | **{_fmt_tokens(int(summary['tokens_generated'].sum()))}** | "
                 f"**{_fmt_tokens(int(summary['tokens_trained'].sum()))}** | **{_fmt_hours(gpu_h)}** | | | |")
    crit = critical_path_s(est) / 3600
    top = summary.sort_values("gpu_hours", ascending=False).iloc[0]
    lines += ["", f"{unit}-hours {gpu_h:.2f} (all jobs {all_h:.2f} h); {top['rule']} dominates "
                  f"({100 * top['gpu_hours'] / gpu_h if gpu_h else 0:.0f}%)." if gpu_h else
              f"Job time {all_h:.2f} h.",
              f"Wall time: at least {crit:.2f} h (the critical path, with a {unit} for every job that can run)"
              + (f"; with {parallel} jobs at a time about {max(crit, all_h / parallel):.2f} h." if parallel else ".")]
    if device == "cpu":
        lines.append(f"device: cpu: the GPU rules run on the CPU, so their hours are CPU hours; unmeasured, at "
                     f"{defaults_for(device).source}, transformers in float32 (docs/cost-plan.md); --calibrate-from "
                     "a run on your machine measures yours.")
    return "\n".join(lines) + "\n"


def write_plan(config: dict, parallel: int | None = None, folders: list[str] | None = None) -> tuple[str, Path]:
    """Estimate, write ``plan/cost.md`` and ``plan/cost.csv`` (per job) and ``plan/jobs.csv`` under the results
    folder; returns the Markdown and its path."""
    est = estimate(config, folders)
    summary = summarize(est)
    text = render(summary, est, parallel, config["device"])
    root = Path(config["results"]) / "plan"
    write_jobs(config)
    write_text(est.to_csv(index=False), root / "cost.csv")
    write_text(text, root / "cost.md")
    return text, root / "cost.md"


# ---------------------------------------------------------------------------------------------------------------
# Runtime requests of the GPU rules

@lru_cache(maxsize=8)
def _cached(key: str) -> dict[tuple[str, str], float]:
    """Every job's estimated seconds by (rule, name), once per config in a Snakemake process."""
    try:
        est = estimate(json.loads(key))
    except Exception as e:  # never stop a workflow for its cost plan: the ceiling is safe
        log.warning("no cost estimate (%s: %s); runtime requests are cost.runtime_ceiling", type(e).__name__, e)
        return {}
    return {(r.rule, r.name): r.seconds for r in est.itertuples()}


def runtime_minutes(config: dict, rule: str, wildcards: dict) -> int:
    """The SLURM runtime (minutes) a GPU job asks for: its estimate x ``cost.margin``, within
    [``cost.runtime_floor``, ``cost.runtime_ceiling``]."""
    # Not sorted: a sweep's axes are in config order, which names its variants (and so the jobs).
    seconds = _cached(json.dumps(config, default=str))
    c = Cost.from_dict(config.get("cost"))
    estimate_s = seconds.get((rule, job_name(config, rule, wildcards)))
    if estimate_s is None:  # a job outside the plan (a target named by hand): the ceiling is safe
        return c.runtime_ceiling
    return request_minutes(estimate_s, c)


def request_minutes(seconds: float, c: Cost) -> int:
    """``seconds`` x ``c.margin`` in whole minutes, between ``c.runtime_floor`` and ``c.runtime_ceiling``."""
    return int(min(max(math.ceil(seconds * c.margin / 60), c.runtime_floor), c.runtime_ceiling))


"""analysis.drift in the workflow: one drift job per trained arm (its subset scored again by its final adapter with
the score job's sampling), the drift table, and a finished run that turns it on running only what it adds."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from conftest import TINY, edited_config
from grpo_budget.aggregate import drift as drift_table
from grpo_budget.experiment import config, plan
from grpo_budget.io import read_parquet

ROOT = Path(__file__).resolve().parents[1]
SWEEP = ROOT / "tests/configs/tiny-sweep.yaml"


def snakemake(*args: str) -> subprocess.CompletedProcess:
    out = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", *args], cwd=ROOT, capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return out


def planned(out: subprocess.CompletedProcess) -> dict[str, int]:
    """The dry run's job counts by rule ({} for "Nothing to be done")."""
    text = out.stdout + out.stderr
    if "Nothing to be done" in text:
        return {}
    table = text.split("Job stats:", 1)[1].split("\n\n", 1)[0].splitlines()[3:]
    return {rule: int(n) for rule, n in (line.split() for line in table) if rule not in ("total", "all")}


def test_the_listing_names_drift_files_only_when_drift_is_on():
    """Off, the run listing (whose digest names the file every aggregate job reads) is what it was before drift
    existed, so no aggregate job of an earlier run re-runs; on, each run names its drift file."""
    cfg = config.load(TINY)
    assert "drift" not in plan.listing(cfg).to_json() and plan.drift_models(cfg) == []
    cfg["analysis"]["drift"] = True
    lst = plan.listing(cfg)
    assert [r.drift for r in lst.runs] == [plan.paths(cfg["results"]).subset.format(**r).replace(
        "subset.parquet", "drift.parquet") for r in plan.grid(cfg)]
    assert plan.Listing.from_dict(json.loads(lst.to_json())) == lst
    assert plan.files_read(lst, frozenset({"drift"})) == [r.drift for r in lst.runs]


def test_the_drift_rule_runs_once_per_trained_arm_with_the_score_jobs_sampling(tmp_path):
    """Dry runs: off (the default) no drift job; on, one per arm (per sweep variant where the config sweeps) and the
    drift table, each job reading the arm's score table, subset and manifest with the score job's settings."""
    results = tmp_path / "results"
    on = edited_config(TINY, tmp_path / "on.yaml", results=str(results), analysis={"drift": True})
    out = snakemake("-n", "-p", "--configfile", str(on))
    counts = planned(out)
    assert counts["drift"] == counts["train"] == 3 and counts["table"] == 7  # the tiny run's six tables and drift
    command = next(line for line in out.stdout.splitlines() if " drift --model " in line and "_hard_" in line)
    run = f"{results}/runs/tiny/framearith/hard/b0.2/s0"
    for part in (f"--scores {results}/scores/tiny/framearith.parquet", f"--subset {run}/subset.parquet",
                 f"--manifest {run}/manifest.json", f"--out {run}/drift.parquet"):
        assert part in command
    score = next(line for line in out.stdout.splitlines() if " score --model " in line)
    settings = score.split("--settings ", 1)[1].split(" --dataset", 1)[0]
    assert f"--settings {settings} --dataset" in command  # the score job's sampling, K and seed

    swept = edited_config(SWEEP, tmp_path / "sweep.yaml", results=str(results), analysis={"drift": True})
    out = snakemake("-n", "-p", "--configfile", str(swept))
    counts = planned(out)
    assert counts["drift"] == counts["train"] > counts["select"]  # one per variant of each arm
    assert f"{results}/runs/tiny/framearith/hard/b0.2/s0/v-G4/drift.parquet" in out.stdout


@pytest.mark.slow
@pytest.mark.tiny_reader
def test_a_finished_run_that_turns_drift_on_runs_only_what_it_adds(tiny_run, tmp_path):
    """The session's tiny run, copied: drift on adds the three drift jobs and the drift table (the aggregates
    re-run: the run listing names the new files) and re-runs nothing else; each arm's subset is scored again at
    its final checkpoint with the score job's K and the scoring's counts beside it, the table counts each file's
    moves, and a second run does nothing. Off again, only the aggregates are re-made (the listing is the old
    one again)."""
    results = tmp_path / "results"
    shutil.copytree(tiny_run, results, symlinks=True)
    on = edited_config(TINY, tmp_path / "on.yaml", results=str(results), analysis={"drift": True})
    counts = planned(snakemake("-n", "--configfile", str(on)))
    assert counts.pop("drift") == 3 and set(counts) <= {"summary", "table", "figure"}, counts
    snakemake("--configfile", str(on))
    assert planned(snakemake("-n", "--configfile", str(on))) == {}
    off = edited_config(TINY, tmp_path / "off.yaml", results=str(results))
    assert set(planned(snakemake("-n", "--configfile", str(off)))) == {"summary", "table", "figure"}  # not the runs

    scores = read_parquet(results / "scores/tiny/framearith.parquet", ["id", "n_samples", "n_correct"])
    per_seed = pd.read_csv(results / "tables/drift.csv").set_index("policy")
    for policy, budget in (("hard", "0.2"), ("random", "0.2"), ("full", "all")):
        run = results / f"runs/tiny/framearith/{policy}/b{budget}/s0"
        after = read_parquet(run / "drift.parquet")
        subset = read_parquet(run / "subset.parquet", ["id"])
        assert sorted(after["id"]) == sorted(subset["id"]) and after["paired"].all()
        assert (after["step"] == 6).all()  # the final adapter (max_steps 6)
        assert (after["n_samples"] == 4).all() and (after["n_samples_before"] == 4).all()  # K of the score job
        before = scores.set_index("id").loc[after["id"]]
        assert after["n_correct_before"].tolist() == before["n_correct"].tolist()
        m = drift_table.transitions(scores, after)
        assert per_seed.loc[policy, drift_table.TRANSITIONS].tolist() == list(drift_table.flat(m).values())
        assert per_seed.loc[policy, "items"] == len(subset)
    assert (results / "tables/drift.md").read_text().startswith("# Drift: how training moved each arm's items")

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
from grpo_budget import cli
from grpo_budget.aggregate import drift as drift_table
from grpo_budget.aggregate import regime
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


# The regime map's CI form (configs/regime-map-cpu.yaml at the tiny config's size): the session's tiny run plus a
# second base model of its task (another bootstrap seed: base-model luck, the map's spread at one competence), with
# drift on. Its arms are the tiny run's two subsets, not its full arm (a map compares subsets of one budget).
SECOND = "tiny_s1"
MAP_POLICIES = ["hard", "random"]


def map_config(out: Path, results: Path, drift: bool) -> Path:
    tiny = config.load(TINY)["models"]["tiny"]
    second = {"bootstrap": dict(tiny["bootstrap"], seed=1)}
    return edited_config(TINY, out, results=str(results), models={"tiny": tiny, SECOND: second},
                         policies=MAP_POLICIES, analysis={"drift": drift})


@pytest.mark.slow
@pytest.mark.beside
def test_a_finished_run_that_adds_a_base_model_and_drift_runs_only_what_they_add_and_maps_both(
        tiny_run, tmp_path, capsys):
    """The session's tiny run, copied, becomes a regime map of two base models: a second base model and drift added
    run only their own jobs (the tiny model's arms are not trained again; its verification and the aggregates re-run,
    as they read other files) and a second run does nothing. Each arm's subset is scored again at its final
    checkpoint with the score job's K, the scoring's counts beside it, and the drift table counts each file's moves.
    The regime
    table has a row per base model: its pool's profile from its own score table, its base accuracy, each arm's gain
    (its final test accuracy over the base's, one seed) inside its interval and the tied-first arms; the figure is
    written, the prediction says why two base models recommend nothing and ``recommend`` refuses. Drift off again
    re-makes only the aggregates (the listing is the one without drift files)."""
    results = tmp_path / "results"
    shutil.copytree(tiny_run, results, symlinks=True)
    on = map_config(tmp_path / "on.yaml", results, drift=True)
    counts = planned(snakemake("-n", "--configfile", str(on)))
    aggregates = {"summary", "table", "figure"}
    # the second model's jobs and drift for all four arms; and tiny's verification, which scores the union of its
    # arms' subsets, now without the full arm's
    added = {"bootstrap_model": 1, "score": 1, "verify": 2, "evaluate_base": 1, "select": 2, "train": 2,
             "evaluate": 2, "drift": 4}
    assert {rule: n for rule, n in counts.items() if rule not in aggregates} == added, counts
    snakemake("--configfile", str(on))
    assert planned(snakemake("-n", "--configfile", str(on))) == {}
    off = map_config(tmp_path / "off.yaml", results, drift=False)
    assert set(planned(snakemake("-n", "--configfile", str(off)))) == aggregates  # not the runs

    per_seed = pd.read_csv(results / "tables/drift.csv").set_index(["model", "policy"])
    pools = {model: read_parquet(results / f"scores/{model}/framearith.parquet") for model in ("tiny", SECOND)}
    for model, scores in pools.items():
        for policy in MAP_POLICIES:
            run = results / f"runs/{model}/framearith/{policy}/b0.2/s0"
            after = read_parquet(run / "drift.parquet")
            subset = read_parquet(run / "subset.parquet", ["id"])
            assert sorted(after["id"]) == sorted(subset["id"]) and after["paired"].all()
            assert (after["step"] == 6).all()  # the final adapter (max_steps 6)
            assert (after["n_samples"] == 4).all() and (after["n_samples_before"] == 4).all()  # K of the score job
            before = scores.set_index("id").loc[after["id"]]
            assert after["n_correct_before"].tolist() == before["n_correct"].tolist()
            m = drift_table.transitions(scores, after)
            assert per_seed.loc[(model, policy), drift_table.TRANSITIONS].tolist() == list(drift_table.flat(m).values())
            assert per_seed.loc[(model, policy), "items"] == len(subset)
    assert (results / "tables/drift.md").read_text().startswith("# Drift: how training moved each arm's items")

    the_map = pd.read_csv(results / "tables/regime.csv").set_index("model")
    assert sorted(the_map.index) == ["tiny", SECOND] and (the_map["budget"].astype(str) == "0.2").all()
    listing = plan.listing(config.load(on))
    base = {b.model: read_parquet(b.path)["accuracy"].mean() for b in listing.base}
    for model, row in the_map.iterrows():
        profile = regime.profile(pools[model])
        assert (row.pool_items, row.pool_mean, row.share_zero) == pytest.approx(
            (profile["pool_items"], profile["pool_mean"], profile["share_zero"]))
        assert row.share_zero + row.share_mixed + row.share_one == pytest.approx(1.0)
        assert row.base_acc == pytest.approx(base[model])
        for r in (r for r in listing.runs if r.model == model):
            final = read_parquet(r.evals["framearith"])
            final = final[final["step"] == final["step"].max()]["accuracy"].mean()
            assert row[f"gain_{r.policy}"] == pytest.approx(100 * (final - base[model]))  # one seed: its own gain
            assert row[f"gain_{r.policy}_lo"] <= row[f"gain_{r.policy}"] <= row[f"gain_{r.policy}_hi"]
        assert row["first"] and set(row["first"].split()) <= set(MAP_POLICIES)
    assert (results / "figures/gain_vs_competence.png").read_bytes()[:4] == b"\x89PNG"
    assert "validated on 2 base model(s); it needs 3" in (results / "tables/prediction.md").read_text()
    with pytest.raises(SystemExit) as stop:  # as tests/aggregate/test_recommend.py calls it
        cli.main(["recommend", "--configfile", str(on), "--model", SECOND])
    out = capsys.readouterr().out
    assert stop.value.code == 1, out
    assert "cannot recommend yet" in out and "validated on 2 base model(s); it needs 3" in out

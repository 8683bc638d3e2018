"""Tokens and wall time per optimizer step of each training method on the same subset, side by side.

Trains the same subset with each method of ``training.method`` for ``--steps`` steps, the methods interleaved and
repeated (``--repeats``) so that a noisy machine hits them alike, and prints per method: rollouts and completion tokens
generated per step, wall seconds per step (the whole train() call over its steps, model loading included) and TRL's
own ``step_time``. Reads the subset, model and dataset entry of a finished run of ``configs/methods-cpu.yaml``:

    .venv/bin/python perf/method_steps.py --results results-methods --policy hard --steps 10 --repeats 2
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workflow"))

from grpo_budget.config.settings import Training  # noqa: E402
from grpo_budget.train import methods, training  # noqa: E402


def recorded_arm(results: Path, policy: str, variant: str) -> tuple[dict, dict, Path]:
    """A finished run's seed-0 arm of ``policy`` trained as sweep variant ``variant``: its training settings and
    dataset entry (from its train job's record) and its subset."""
    record = json.loads(next((results / "provenance/train").glob(f"*_{policy}_*s0_v-{variant}.json")).read_text())
    subset = next((results / "runs/tiny/framearith" / policy).glob("b*/s0/subset.parquet"))
    return json.loads(record["settings"]["settings"]), json.loads(record["settings"]["dataset"]), subset


def train_log(results: Path, subset: Path, t: Training, dataset: dict, seed: int) -> pd.DataFrame:
    """``subset`` trained with ``t`` from the run's tiny model in a temporary folder: its train log's step rows."""
    with tempfile.TemporaryDirectory() as tmp:
        training.train(subset, str(results / "models/tiny"), Path(tmp) / "ck", Path(tmp) / "log.parquet",
                       Path(tmp) / "manifest.json", t, dataset, seed=seed)
        return pd.read_parquet(Path(tmp) / "log.parquet").dropna(subset=["rollouts/generated"])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--results", default="results-methods")
    p.add_argument("--policy", default="hard")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--repeats", type=int, default=2)
    a = p.parse_args()
    results = Path(a.results)
    settings, dataset, subset = recorded_arm(results, a.policy, "grpo")
    rows = []
    for rep in range(a.repeats):
        for method in methods.METHODS:
            t = Training.from_dict({**settings, "method": method, "max_steps": a.steps, "save_steps": a.steps})
            start = time.perf_counter()
            log = train_log(results, subset, t, dataset, seed=0)
            wall = time.perf_counter() - start
            rows.append({"method": method, "repeat": rep, "wall_s_per_step": wall / a.steps,
                         "trl_step_time_s": log["step_time"].mean() if "step_time" in log else float("nan"),
                         "rollouts_per_step": log["rollouts/generated"].mean(),
                         "tokens_per_step": log["rollouts/generated_tokens"].mean()})
    df = pd.DataFrame(rows).groupby("method", sort=False).mean(numeric_only=True).drop(columns="repeat")
    df["tokens_vs_grpo"] = df["tokens_per_step"] / df.loc["grpo", "tokens_per_step"]
    df["wall_vs_grpo"] = df["wall_s_per_step"] / df.loc["grpo", "wall_s_per_step"]
    print(f"{a.policy} subset of {results}, {a.steps} steps x {a.repeats} repeats per method (mean):")
    print(df.round(3).to_string())


if __name__ == "__main__":
    main()

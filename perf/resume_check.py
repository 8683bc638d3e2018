"""The resume table: an arm trained straight through against the same arm killed after a checkpoint and resumed.

Trains a subset once without interruption, then, for each ``--kill-at`` step, copies its checkpoint folder as a job
killed right after that checkpoint leaves it (the checkpoints up to that step and ``fingerprint.json``) and runs
``train()`` again, which resumes from it. Prints each run's checkpoint digests (the first 8 hex digits of the adapter's
sha256, as the manifest lists them) and whether its train log equals the straight run's, row for row and column for
column, but for the columns that differ between any two runs (wall times) and ``resumed_from``. Reads the tiny config's bootstrapped model and a 40-item subset:

    .venv/bin/snakemake --cores 2 --configfile tests/configs/tiny.yaml \\
        results-tiny/runs/tiny/framearith/random/b0.2/s0/subset.parquet
    .venv/bin/python perf/resume_check.py --method grpo --max-steps 12 --save-steps 3 --kill-at 3 6 9
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

import pandas as pd
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workflow"))

from grpo_budget.config.settings import Training  # noqa: E402
from grpo_budget.train import training  # noqa: E402
from grpo_budget.train.checkpoints import FINGERPRINT_FILE, checkpoints  # noqa: E402
from grpo_budget.train.trainlog import COLUMNS_FILE, WALL_CLOCK  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
# Differ between any two runs (wall time), or say that the run was resumed.
VOLATILE = {"resumed_from", *WALL_CLOCK}


def run(out: Path, subset: Path, model: Path, t: Training, dataset: dict, seed: int) -> tuple[list[str], pd.DataFrame]:
    manifest = training.train(subset, str(model), out / "checkpoints", out / "train_log.parquet",
                              out / "manifest.json", t, dataset, seed)
    return [c["sha256"][:8] for c in manifest["checkpoints"]], pd.read_parquet(out / "train_log.parquet")


def killed_after(straight: Path, out: Path, step: int) -> None:
    """What a job killed right after saving ``checkpoint-{step}`` leaves: that checkpoint and the earlier ones."""
    (out / "checkpoints").mkdir(parents=True)
    for name in (FINGERPRINT_FILE, COLUMNS_FILE):
        if (straight / "checkpoints" / name).exists():
            shutil.copy2(straight / "checkpoints" / name, out / "checkpoints" / name)
    for s, path in checkpoints(straight / "checkpoints"):
        if s <= step:
            shutil.copytree(path, out / "checkpoints" / path.name)


def comparable(log: pd.DataFrame) -> pd.DataFrame:
    return log.drop(columns=[c for c in log.columns if c in VOLATILE]).reset_index(drop=True)


def log_difference(a: pd.DataFrame, b: pd.DataFrame) -> str:
    """"equal", or where two train logs first differ."""
    a, b = comparable(a), comparable(b)
    if list(a.columns) != list(b.columns):
        return "other columns" if set(a.columns) != set(b.columns) else "columns in another order"
    if len(a) != len(b):
        return f"{len(b)} rows, not {len(a)}"
    for i in range(len(a)):
        if not a.iloc[i].equals(b.iloc[i]):
            columns = [c for c in a.columns if not a.iloc[i:i + 1][c].equals(b.iloc[i:i + 1][c])]
            return f"differs from step {int(a['step'].iloc[i])} ({', '.join(columns[:3])})"
    return "equal"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--results", default="results-tiny")
    p.add_argument("--policy", default="random")
    p.add_argument("--method", default="grpo", choices=["grpo", "codapo", "guided"])
    p.add_argument("--dynamic", action="store_true", help="training.dynamic_sampling on")
    p.add_argument("--max-steps", type=int, default=12)
    p.add_argument("--save-steps", type=int, default=3)
    p.add_argument("--kill-at", type=int, nargs="+", default=[6])
    p.add_argument("--out", default="/tmp/resume-check")
    a = p.parse_args()
    cfg = yaml.safe_load((ROOT / "tests/configs/tiny.yaml").read_text())
    dataset = cfg["datasets"]["framearith"]
    results = Path(a.results)
    subset = next((results / "runs/tiny/framearith" / a.policy).glob("b*/s0/subset.parquet"))
    t = Training.from_dict({**cfg["training"], "max_steps": a.max_steps, "save_steps": a.save_steps,
                            "method": a.method, "dynamic_sampling": a.dynamic})
    name = f"{a.method}{'-dynamic' if a.dynamic else ''}"
    out = Path(a.out) / name
    shutil.rmtree(out, ignore_errors=True)
    digests, log = run(out / "straight", subset, results / "models/tiny", t, dataset, 0)
    rows = [{"run": name, "killed after": "-", **dict(enumerate(digests)), "log": "-"}]
    for step in a.kill_at:
        killed_after(out / "straight", out / f"killed-{step}", step)
        d, resumed_log = run(out / f"killed-{step}", subset, results / "models/tiny", t, dataset, 0)
        rows.append({"run": name, "killed after": step, **dict(enumerate(d)), "log": log_difference(log, resumed_log)})
    table = pd.DataFrame(rows)
    print(table.to_string(index=False))
    print(json.dumps(rows))


if __name__ == "__main__":
    main()

"""Calibrate the cost plan on runs of tests/configs/tiny.yaml and its sweep (tiny-sweep.yaml), then check its
per-job predictions for the embedded default (config.yaml) against a real run of it on the same machine.

    .venv/bin/python perf/cost_calibration.py                      # runs all three (~2 + ~2 + ~6 min on 2 idle cores)
    .venv/bin/python perf/cost_calibration.py --tiny DIR --tiny-sweep DIR --default DIR   # reuse finished runs
    .venv/bin/python perf/cost_calibration.py ... --reuse --jobs   # never run; print every job

The prediction uses the tiny runs' measurements only (``cost.calibrate_from: [TINY, TINY_SWEEP]``) and the embedded
default's config alone (a results folder with nothing in it), as a plan before submitting would. The sweep is there
for training: tiny.yaml's arms all train the same batch shape, so its training time cannot be split between decoding
steps and tokens; the sweep's G = 4 and 8 arms train 32 and 64 completions per step over the same steps. It prints, per rule, the
mean predicted and measured seconds per job and their ratio, and exits 1 when train, score or evaluate is off by
more than ±30%. Timings on a loaded machine are noisy: run it on a quiet one.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "workflow"))

from grpo_budget.cluster import cost  # noqa: E402
from grpo_budget.cluster.rates import fit_rates, measurements  # noqa: E402
from grpo_budget.experiment.rules import RULES  # noqa: E402
from grpo_budget.cluster.work import write_jobs  # noqa: E402
from grpo_budget.experiment import config as config_mod  # noqa: E402

CHECKED = ("score", "train", "evaluate")  # the stages the plan must predict within TOLERANCE
TOLERANCE = 0.30


def run(configfile: Path | None, results: Path, cores: int, reuse: bool = False) -> None:
    """Run the workflow into ``results`` unless it finished there already (or ``reuse``: take what is there)."""
    if (results / "summary.csv").exists() or (reuse and (results / "benchmarks").is_dir()):
        print(f"reusing the finished run in {results}")
        return
    args = [sys.executable, "-m", "snakemake", "--cores", str(cores), "--config", f"results={results}"]
    if configfile:
        args += ["--configfile", str(configfile)]
    print("running:", " ".join(args), flush=True)
    subprocess.run(args, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)


def load(configfile: Path, results: Path) -> dict:
    cfg = config_mod.load(configfile)
    cfg["results"] = str(results)
    return cfg


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tiny", type=Path, default=Path(tempfile.gettempdir()) / "grpo-cost-calibration" / "tiny")
    p.add_argument("--tiny-sweep", type=Path,
                   default=Path(tempfile.gettempdir()) / "grpo-cost-calibration" / "tiny-sweep")
    p.add_argument("--default", type=Path, default=Path(tempfile.gettempdir()) / "grpo-cost-calibration" / "default")
    p.add_argument("--default-config", type=Path, default=ROOT / "config.yaml",
                   help="the config the default run used (when reusing a run made from an earlier config.yaml)")
    p.add_argument("--cores", type=int, default=2)
    p.add_argument("--jobs", action="store_true", help="also print every job's prediction and measurement")
    p.add_argument("--reuse", action="store_true", help="never run: compare with the benchmark files already there")
    a = p.parse_args(argv)

    folders = []
    for name, folder in (("tiny.yaml", a.tiny), ("tiny-sweep.yaml", a.tiny_sweep)):
        cfg_file = ROOT / "tests" / "configs" / name
        run(cfg_file, folder.resolve(), a.cores, a.reuse)
        write_jobs(load(cfg_file, folder.resolve()))  # the runs write it too; here for runs made before they did
        folders.append(str(folder.resolve()))

    # The plan before submitting: the default's config alone, rates from the tiny runs only.
    with tempfile.TemporaryDirectory() as empty:
        plan_cfg = load(a.default_config, Path(empty))
        predicted = cost.estimate(plan_cfg, folders=folders)
    fit = fit_rates(measurements(folders))
    print("\nrates fitted on the tiny runs:")
    for (kind, size), r in sorted(fit.items()):
        print(f"  {kind:16s} {size:g}B: startup {r.startup:6.1f} s, {1e3 * r.per_pass:7.2f} ms per decoding step, "
              f"{1e6 * r.per_token:7.2f} us per token  ({r.source})")

    default_cfg = load(a.default_config, a.default.resolve())
    run(None, a.default.resolve(), a.cores, a.reuse)
    write_jobs(default_cfg)
    measured = measurements([str(a.default.resolve())])
    both = predicted.merge(measured[["rule", "name", "seconds", "loop_seconds"]]
                           .rename(columns={"seconds": "measured_s", "loop_seconds": "measured_work_s"}),
                           on=["rule", "name"], how="inner")
    startups = {(kind, size): r.startup for (kind, size), r in fit.items()}
    both["work_s"] = [row.seconds - startups.get((row.kind, row.size_b), startups.get((row.rule, 0.0), 0.0))
                      for row in both.itertuples()]
    if a.jobs:
        print("\n" + both[["rule", "name", "work", "seconds", "measured_s"]].to_string(index=False))
    print("\nembedded default, predicted from the tiny runs vs measured (seconds per job, mean over the rule's jobs):")
    print(f"{'rule':16s} {'jobs':>4s} {'predicted':>10s} {'measured':>10s} {'ratio':>7s}   "
          f"{'of which working (predicted / measured, from the job logs)'}")
    failed = []
    for rule, rows in both.groupby("rule", sort=False):
        pred, meas = rows["seconds"].mean(), rows["measured_s"].mean()
        ratio = pred / meas if meas else float("nan")
        stage = RULES[rule].stage
        flag = ""
        if stage in CHECKED:
            ok = abs(ratio - 1) <= TOLERANCE
            flag = "ok" if ok else f"OFF by more than {TOLERANCE:.0%}"
            if not ok:
                failed.append(rule)
        work = ""
        if rows["measured_work_s"].notna().any():
            work = f"{rows['work_s'].mean():7.1f} / {rows['measured_work_s'].mean():7.1f}"
        print(f"{rule:16s} {len(rows):4d} {pred:10.1f} {meas:10.1f} {ratio:7.2f}   {work:18s} {flag}")
    print("\nwithin ±30% for train, score and evaluate jobs" if not failed else f"\noff: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

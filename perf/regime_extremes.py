"""Each base model of a regime-map run (configs/regime-map-cpu.yaml): its pool's scoring and the learnability
prediction, with the pool's Beta prior refitted by another version's ``fit_beta_prior`` beside this one's.

    .venv/bin/python perf/regime_extremes.py results-regime-map [--old-code ../wt-old/workflow]

Per model: the base accuracy, samples per item, the share of items at 0 and at all correct, the prior (alpha + beta)
and the spread (sd) of the posterior means every policy orders by, then (with ``--old-code``) the same prior fitted
by the other version on the same counts. Then per model and arm, seeds pooled: the prediction the learnable table
leads with and the mixed share observed at step 1 with its 95% Wilson interval (``tables/learnable.csv``).
"""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

import numpy as np
import pandas as pd

from grpo_budget import stats
from grpo_budget.beta import beta_posterior, fit_beta_prior
from grpo_budget.io import read_parquet


def other_fit(code: Path):
    """``fit_beta_prior`` of another checkout's ``grpo_budget/beta.py`` (it imports nothing of the package)."""
    spec = importlib.util.spec_from_file_location("other_beta", code / "grpo_budget" / "beta.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.fit_beta_prior


def pool_row(scores: pd.DataFrame, fit) -> dict:
    k, n = scores["n_correct"].to_numpy(float), scores["n_samples"].to_numpy(float)
    a, b = fit(k, n)
    post = beta_posterior(k, n, a, b)
    return {"alpha + beta": a + b, "posterior sd": float(post["mean"].std())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", type=Path)
    ap.add_argument("--old-code", type=Path, help="another checkout's workflow/ folder, to refit with its prior")
    a = ap.parse_args()
    old = other_fit(a.old_code) if a.old_code else None
    base = pd.read_csv(a.results / "summary.csv").groupby("model")["base_acc"].first()
    rows = []
    for path in sorted((a.results / "scores").glob("*/*.parquet")):
        scores = read_parquet(path)
        k, n = scores["n_correct"], scores["n_samples"]
        row = {"model": path.parent.name, "base %": 100 * float(base.get(path.parent.name, np.nan)),
               "samples/item": float(n.mean()), "at 0": float((k == 0).mean()), "all correct": float((k == n).mean())}
        row |= {f"{key} (this)": v for key, v in pool_row(scores, fit_beta_prior).items()}
        if old is not None:
            row |= {f"{key} (old)": v for key, v in pool_row(scores, old).items()}
        rows.append(row)
    print(pd.DataFrame(rows).to_markdown(index=False, floatfmt=".3g"))
    learn = pd.read_csv(a.results / "tables" / "learnable.csv")

    out = []
    for (model, policy), g in learn.groupby(["model", "policy"], sort=False):
        groups = int(g["window_groups"].sum())
        observed = float(np.average(g["observed_first_pct"], weights=g["window_groups"])) / 100
        lo, hi = stats.wilson_interval(observed, groups, 0.95)
        out.append({"model": model, "arm": policy, "predicted %": g["predicted_pct"].mean(),
                    "from": g["predicted_from"].iloc[0], "observed step 1 %": 100 * observed,
                    "95% interval": f"[{100 * lo:.1f}, {100 * hi:.1f}]",
                    "inside": lo <= g["predicted_pct"].mean() / 100 <= hi})
    print()
    print(pd.DataFrame(out).to_markdown(index=False, floatfmt=".1f"))


if __name__ == "__main__":
    main()

"""Gains tables: base vs trained accuracy and its paired bootstrap gain per run (the summary) and per arm over
seeds, and accuracy per checkpoint (learning curves)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from grpo_budget import stats
from grpo_budget.aggregate.learnable import learnable_row
from grpo_budget.aggregate.read import ARM, KEYS, available_columns, read_table, item_records, sort_arms, finish
from grpo_budget.experiment.plan import Listing
from grpo_budget.config.settings import Analysis
from grpo_budget.select.sources import labels_bought


def compare(base: np.ndarray, trained: np.ndarray, s: Analysis) -> dict:
    """Base vs trained per-item scores on the same items: accuracies, gain and their intervals.

    ``base``: (items,); ``trained``: (items,) for one seed or (seeds, items) for several.
    """
    B = np.asarray(base, dtype=float)
    T = np.atleast_2d(np.asarray(trained, dtype=float))
    S = T.shape[0]
    base_lo, base_hi = stats.bootstrap_mean_ci(B[None], s.n_boot, s.seed, s.level)
    final_lo, final_hi = stats.bootstrap_mean_ci(T, s.n_boot, s.seed, s.level)
    seed_gains = 100 * (T.mean(axis=1) - B.mean())
    out = {"n_seeds": S, "n_items": B.size, "base_acc": float(B.mean()), "base_lo": base_lo, "base_hi": base_hi,
           "final_acc": float(T.mean()), "final_lo": final_lo, "final_hi": final_hi,
           "final_sd": float(T.mean(axis=1).std(ddof=1)) if S > 1 else np.nan,
           "gain_pts": float(seed_gains.mean()), "gain_sd": float(seed_gains.std(ddof=1)) if S > 1 else np.nan}
    if S == 1:
        g = stats.paired_bootstrap_gain(B, T[0], n_boot=s.n_boot, seed=s.seed, level=s.level)
        out.update(gain_lo=g["gain_lo"], gain_hi=g["gain_hi"], rel_gain=g["rel_gain"],
                   rel_gain_lo=g["rel_gain_lo"], rel_gain_hi=g["rel_gain_hi"])
    else:
        lo, hi = stats.bootstrap_mean_ci(100 * (T - B[None]), s.n_boot, s.seed, s.level)
        out.update(gain_lo=lo, gain_hi=hi, rel_gain=stats.relative_gain(B.mean(), T.mean()),
                   rel_gain_lo=np.nan, rel_gain_hi=np.nan)
    return out


def summary_table(runs: Listing, s: Analysis) -> pd.DataFrame:
    """One row per run and evaluation set: base, final and best accuracy, paired-bootstrap gain, learnability."""
    rows = []
    learn = {id(r): learnable_row(r, runs, s) for r in runs.runs}
    for rec in item_records(runs):
        r, steps = rec["run"], rec["steps"]
        by_step = steps.mean()
        final_step, best_step = int(by_step.index.max()), int(by_step.idxmax())
        c = compare(rec["base"].to_numpy(), steps[final_step].to_numpy(), s)
        subset = read_table(r.subset, available_columns(r.subset, ["pass_rate", "scoring_labels"]))
        lr = learn[id(r)]
        rows.append({
            **{k: getattr(r, k) for k in KEYS}, "evalset": rec["evalset"], "ood": rec["ood"], "n_test": c["n_items"],
            "subset_size": len(subset), "subset_mean_pass_rate": subset["pass_rate"].mean(),
            "labels_bought": labels_bought(subset)["total"],
            "base_acc": c["base_acc"], "final_step": final_step, "final_acc": c["final_acc"],
            "best_step": best_step, "best_acc": float(by_step.max()),
            "gain_pts": c["gain_pts"], "gain_lo": c["gain_lo"], "gain_hi": c["gain_hi"],
            "best_gain_pts": 100 * (float(by_step.max()) - c["base_acc"]),
            "rel_gain": c["rel_gain"], "rel_gain_lo": c["rel_gain_lo"], "rel_gain_hi": c["rel_gain_hi"],
            "learnable_pct": lr["observed_all_pct"],
            "predicted_learnable_pct": lr["predicted_pct"],
        })
    return finish(sort_arms(pd.DataFrame(rows), ["seed"]).reset_index(drop=True), runs)


def _records_by_arm(runs: Listing) -> dict[tuple, list[dict]]:
    """The records of :func:`grpo_budget.aggregate.read.item_records` grouped by arm (model, dataset, policy, budget)
    and evaluation set."""
    groups: dict[tuple, list[dict]] = {}
    for rec in item_records(runs):
        groups.setdefault((*[getattr(rec["run"], k) for k in ARM], rec["evalset"]), []).append(rec)
    return groups


def gains_over_seeds(runs: Listing, s: Analysis, bought: bool = True) -> pd.DataFrame:
    """One row per arm and evaluation set: means over seeds, std over seeds, intervals over seeds and items; with
    ``bought``, the labels each arm bought (read from its subsets)."""
    groups = _records_by_arm(runs)
    rows = []
    for key, recs in groups.items():
        base = recs[0]["base"]
        finals = np.stack([rec["steps"][rec["steps"].columns.max()].loc[base.index].to_numpy() for rec in recs])
        best = [rec["steps"].mean().max() for rec in recs]
        c = compare(base.to_numpy(), finals, s)
        labels = [labels_bought(read_table(rec["run"].subset,
                                           available_columns(rec["run"].subset, ["id", "scoring_labels"])))["total"]
                  for rec in recs] if bought else [np.nan]
        rows.append({**dict(zip(ARM + ["evalset"], key)), "ood": recs[0]["ood"], "n_test": c["n_items"],
                     "n_seeds": c["n_seeds"], "labels_bought": float(np.mean(labels)), "base_acc": c["base_acc"], "final_acc": c["final_acc"],
                     "final_sd": c["final_sd"], "best_acc": float(np.mean(best)), "gain_pts": c["gain_pts"],
                     "gain_sd": c["gain_sd"], "gain_lo": c["gain_lo"], "gain_hi": c["gain_hi"],
                     "rel_gain": c["rel_gain"]})
    return finish(sort_arms(pd.DataFrame(rows)).reset_index(drop=True), runs)


def curves(runs: Listing, s: Analysis) -> pd.DataFrame:
    """Accuracy per checkpoint for every arm and evaluation set (mean over seeds) with its interval; the base
    model is step 0 (items resampled)."""
    groups = _records_by_arm(runs)
    rows = []
    for key, recs in groups.items():
        ids = recs[0]["base"].index
        base = recs[0]["base"].to_numpy()
        lo, hi = stats.bootstrap_mean_ci(base[None], s.n_boot, s.seed, s.level)
        rows.append({**dict(zip(ARM + ["evalset"], key)), "step": 0, "n_seeds": len(recs),
                     "accuracy": float(base.mean()), "lo": lo, "hi": hi})
        steps = sorted(set.intersection(*[set(r["steps"].columns) for r in recs]))
        for step in steps:
            mat = np.stack([r["steps"][step].loc[ids].to_numpy() for r in recs])
            lo, hi = stats.bootstrap_mean_ci(mat, s.n_boot, s.seed, s.level)
            rows.append({**dict(zip(ARM + ["evalset"], key)), "step": int(step), "n_seeds": len(recs),
                         "accuracy": float(mat.mean()), "lo": lo, "hi": hi})
    return finish(sort_arms(pd.DataFrame(rows), ["step"]).reset_index(drop=True), runs)

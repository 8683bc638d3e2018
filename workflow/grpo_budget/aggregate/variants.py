"""Variant against variant: for each arm (a policy at a budget) of a sweep, every pair of its training variants
(training methods, settings) at equal steps and at matched generated tokens, with paired bootstrap intervals."""

from __future__ import annotations

import numpy as np
import pandas as pd

from grpo_budget import power, stats
from grpo_budget.aggregate.compute import at_tokens, matched_tokens, seed_curves
from grpo_budget.experiment.plan import Listing
from grpo_budget.config.settings import Analysis

COLUMNS = ["model", "dataset", "evalset", "ood", "policy", "budget", "variant_a", "variant_b", "seeds_a", "seeds_b",
           "n_items", "acc_a", "acc_b", "diff_pts", "diff_lo", "diff_hi", "verdict", "seeds_needed", "tokens",
           "tok_acc_a", "tok_acc_b", "tok_diff_pts", "tok_diff_lo", "tok_diff_hi", "tok_verdict"]


def _compare(a: np.ndarray, b: np.ndarray, va: str, vb: str, s: Analysis, prefix: str) -> dict:
    d = stats.paired_difference_ci(a, b, s.n_boot, s.seed, s.level)
    v = stats.verdict(d["lo"], d["hi"])
    return {f"{prefix}acc_a": float(a.mean()), f"{prefix}acc_b": float(b.mean()), f"{prefix}diff_pts": d["diff_pts"],
            f"{prefix}diff_lo": d["lo"], f"{prefix}diff_hi": d["hi"],
            f"{prefix}verdict": {"A": f"{va} better", "B": f"{vb} better"}.get(v, "not distinguishable"),
            "_tie": v == "tie"}


def variant_verdicts(runs: Listing, s: Analysis) -> pd.DataFrame:
    """Per panel (model, dataset, test set) and arm, every pair of its variants: A − B at the final checkpoint
    (every variant trains the same steps) with ``seeds_needed`` for an undecided pair, and A − B at the pair's
    matched compute (``tokens``: the most generated tokens every seed of both reached, scoring included)."""
    rows = []
    for (model, dataset, evalset), arms in seed_curves(runs).items():
        by_arm: dict[tuple, list[str]] = {}
        for policy, budget, variant in arms:
            by_arm.setdefault((policy, budget), []).append(variant)
        for (policy, budget), names in by_arm.items():
            for i, va in enumerate(names):
                for vb in names[i + 1:]:
                    sa, sb = arms[(policy, budget, va)], arms[(policy, budget, vb)]
                    final_a, final_b = np.stack([ys[-1] for _, ys in sa]), np.stack([ys[-1] for _, ys in sb])
                    row = {"model": model, "dataset": dataset, "evalset": evalset, "ood": evalset != dataset,
                           "policy": policy, "budget": budget, "variant_a": va, "variant_b": vb,
                           "seeds_a": len(sa), "seeds_b": len(sb), "n_items": final_a.shape[1]}
                    row.update(_compare(final_a, final_b, va, vb, s, ""))
                    c = power.variance_components(final_a, final_b)
                    row["seeds_needed"] = (power.seeds_needed(row["diff_pts"], c, s.level, test="bootstrap")
                                           if row.pop("_tie") else np.nan)
                    tokens = matched_tokens({va: sa, vb: sb})
                    at_a = np.stack([at_tokens(xs, ys, tokens) for xs, ys in sa])
                    at_b = np.stack([at_tokens(xs, ys, tokens) for xs, ys in sb])
                    row.update(tokens=tokens, **_compare(at_a, at_b, va, vb, s, "tok_"))
                    row.pop("_tie")
                    rows.append(row)
    return pd.DataFrame(rows, columns=COLUMNS)

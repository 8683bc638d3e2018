"""The regime map: per base model (a model × dataset × budget), its pool's pass-rate profile from the score table,
each arm's gain with its interval, and the winners; which subset pays as the base model's competence moves.

Works for any grid with two or more models (the embedded task's base models at several target pass rates, or a
user's real models): the profile is read from each model's own score table.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from grpo_budget.aggregate.answer import beats
from grpo_budget.aggregate.gains import gains_over_seeds
from grpo_budget.aggregate.prediction import FEATURES, subset_features
from grpo_budget.aggregate.read import available_columns, read_table
from grpo_budget.aggregate.verdicts import verdict_table
from grpo_budget.experiment.plan import Listing
from grpo_budget.config.settings import Analysis

PROFILE = ["pool_items", "pool_mean", "share_zero", "share_mixed", "share_one", "mean_samples"]


def profile(scores: pd.DataFrame) -> dict:
    """A pool's pass-rate profile from its score table (``n_samples``, ``n_correct`` per item): the mean pass rate
    (items weighted equally), the shares of items with no correct sample, with mixed outcomes, and with every sample
    correct (over each item's own samples: adaptive scoring draws more for some), and the mean samples per item."""
    n = scores["n_samples"].to_numpy(float)
    k = scores["n_correct"].to_numpy(float)
    scored = n > 0
    n, k = n[scored], k[scored]
    if not len(n):
        return dict.fromkeys(PROFILE, np.nan) | {"pool_items": 0}
    return {"pool_items": int(len(n)), "pool_mean": float(np.mean(k / n)), "share_zero": float(np.mean(k == 0)),
            "share_mixed": float(np.mean((k > 0) & (k < n))), "share_one": float(np.mean(k == n)),
            "mean_samples": float(np.mean(n))}


def regime_table(runs: Listing, s: Analysis) -> pd.DataFrame:
    """One row per base model, dataset, budget (and sweep variant), in distribution: the base model's accuracy,
    its pool's profile (:func:`profile`), each arm's gain over the base in points with its interval
    (``gain_{policy}``, ``gain_{policy}_lo``, ``gain_{policy}_hi``), and ``first``: the arms nothing beats
    distinguishably (``winners``: those of them that beat some arm; empty when no pair is decided)."""
    gains = gains_over_seeds(runs, s, bought=False)
    if gains.empty:
        return pd.DataFrame(columns=["model", "dataset", "budget", "base_acc", *PROFILE, "winners", "first"])
    gains = gains[~gains["ood"].astype(bool)]
    verdicts = verdict_table(runs, s)
    verdicts = verdicts[~verdicts["ood"].astype(bool)] if len(verdicts) else verdicts
    score_paths = {(sc.model, sc.dataset): sc.path for sc in runs.scores}
    by = ["model", "dataset", "budget"] + (["variant"] if "variant" in gains else [])
    rows = []
    for key, g in gains.groupby(by, sort=False):
        path = score_paths.get(key[:2])
        prof = (profile(read_table(path, available_columns(path, ["n_samples", "n_correct"]))) if path
                else dict.fromkeys(PROFILE, np.nan))
        v = verdicts
        for k, val in zip(by, key):
            v = v[v[k] == val] if len(v) else v
        won = beats(v) if len(v) else {}
        first = [p for p in g["policy"] if not any(p in lost for lost in won.values())]
        row = {**dict(zip(by, key)), "base_acc": float(g["base_acc"].iloc[0]), **prof,
               "winners": " ".join(p for p in first if won.get(p)), "first": " ".join(first)}
        for _, r in g.iterrows():
            row.update({f"gain_{r['policy']}": r["gain_pts"], f"gain_{r['policy']}_lo": r["gain_lo"],
                        f"gain_{r['policy']}_hi": r["gain_hi"], f"seeds_{r['policy']}": int(r["n_seeds"])})
        rows.append(row)
    return pd.DataFrame(rows).sort_values(["dataset", "budget", "pool_mean"], kind="stable").reset_index(drop=True)


def policies_in(table: pd.DataFrame) -> list[str]:
    """The policies a regime table has gains for, in column order."""
    return [c[len("gain_"):] for c in table.columns
            if c.startswith("gain_") and not c.endswith(("_lo", "_hi"))]


def map_arms(runs: Listing, s: Analysis) -> pd.DataFrame:
    """The regime map as the prediction reads it (:func:`grpo_budget.aggregate.prediction.leave_one_out`): one row
    per base model (``base``: model, dataset, budget and variant of a :func:`regime_table` row) and arm, its gain
    (points), whether it is tied first, and its subset's features before training (the mean over its seeds'
    subsets: a random arm buys other items with each seed)."""
    table = regime_table(runs, s)
    keys = ["model", "dataset", "budget"] + (["variant"] if "variant" in table else [])
    features: dict[tuple, list[dict]] = {}
    for r in runs.runs:
        columns = available_columns(r.subset, ["n_correct", "n_samples", "eb_prior_a", "eb_prior_b"])
        subset = read_table(r.subset, columns)
        key = tuple(getattr(r, k) for k in keys) + (r.policy,)
        features.setdefault(key, []).append(subset_features(subset, int(runs.training_value(r, "num_generations"))))
    rows = []
    for _, row in table.iterrows():
        first = set(str(row["first"]).split())
        for policy in policies_in(table):
            if pd.isna(row.get(f"gain_{policy}")):
                continue
            f = pd.DataFrame(features.get(tuple(row[k] for k in keys) + (policy,), [{}]))
            rows.append({"base": " · ".join(str(row[k]) for k in keys if str(row[k])), "model": row["model"],
                         "policy": policy, "gain": float(row[f"gain_{policy}"]), "first": policy in first,
                         **{c: float(f[c].mean()) if c in f else np.nan for c in FEATURES if c != "pool_mean"},
                         "pool_mean": np.nan if row["pool_mean"] is None else float(row["pool_mean"])})  # no pool
    return pd.DataFrame(rows, columns=["base", "model", "policy", "gain", "first", *FEATURES])

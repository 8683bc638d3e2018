"""Arm against arm: pairwise differences with paired bootstrap intervals, verdicts and rank tiers, and how soon each
arm matches the full-data arm."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from grpo_budget import power, stats
from grpo_budget.aggregate.read import policy_rank, item_records, sort_arms, finish, shared_ids
from grpo_budget.experiment.plan import FULL_LABEL, Listing
from grpo_budget.config.settings import Analysis


def _arms(runs: Listing) -> dict[tuple, dict[str, dict]]:
    """Per (model, dataset, evalset, budget, variant) and policy: per-item accuracy (seeds × items) at the final
    checkpoint and at each seed's best checkpoint, on the items every arm shares."""
    groups: dict[tuple, dict[str, list[dict]]] = {}
    for rec in item_records(runs):
        r = rec["run"]
        groups.setdefault((r.model, r.dataset, rec["evalset"], r.budget, r.variant), {}).setdefault(r.policy, []).append(rec)
    out = {}
    for key, by_policy in groups.items():
        ids = shared_ids(by_policy.values())
        arms = {}
        for policy, recs in by_policy.items():
            steps = [rec["steps"].loc[ids] for rec in recs]
            arms[policy] = {"final": np.stack([st[st.columns.max()].to_numpy() for st in steps]),
                            "best": np.stack([st[st.mean().idxmax()].to_numpy() for st in steps]),
                            "base": float(recs[0]["base"].loc[ids].mean()), "ood": recs[0]["ood"]}
        out[key] = arms
    return out


def verdict_table(runs: Listing, s: Analysis) -> pd.DataFrame:
    """Every pair of policies on the same model, dataset, test set and budget: the difference in final (and
    best-checkpoint) accuracy, A − B in points, with a paired bootstrap interval over test items (and over each
    arm's seeds when it has several), the verdict, and each arm's rank (1 + the arms distinguishably better).
    With a sweep, policies are compared within each variant (the ``variant`` column).

    Final accuracy only: ``detectable_pts``, the smallest true difference these seeds and items decide with power
    :data:`grpo_budget.power.POWER`, and for undecided pairs ``seeds_needed``, the seeds per arm (same items) that
    would decide the observed difference with that power (``inf``: more test items needed; NaN with a one-seed arm,
    whose run-to-run variance is unknown), both sized for this bootstrap (:mod:`grpo_budget.power`)."""
    rows = []
    for (model, dataset, evalset, budget, variant), arms in _arms(runs).items():
        names = sorted(arms, key=policy_rank)
        better: dict[tuple[str, str], bool] = {}
        pair_rows = []
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                row = {"model": model, "dataset": dataset, "evalset": evalset, "budget": budget, "variant": variant,
                       "ood": arms[a]["ood"], "arm_a": a, "arm_b": b}
                for which, prefix in (("final", ""), ("best", "best_")):
                    d = stats.paired_difference_ci(arms[a][which], arms[b][which], s.n_boot, s.seed, s.level)
                    v = stats.verdict(d["lo"], d["hi"])
                    row.update({f"{prefix}acc_a": float(arms[a][which].mean()),
                                f"{prefix}acc_b": float(arms[b][which].mean()), f"{prefix}diff_pts": d["diff_pts"],
                                f"{prefix}diff_lo": d["lo"], f"{prefix}diff_hi": d["hi"],
                                f"{prefix}verdict": {"A": f"{a} better", "B": f"{b} better"}.get(v, "not distinguishable")})
                    if which == "final":
                        better[(a, b)], better[(b, a)] = v == "A", v == "B"
                        # sized for this table's own bootstrap verdict, which is what more seeds would be judged by
                        c = power.variance_components(arms[a]["final"], arms[b]["final"])
                        row["detectable_pts"] = float(power.detectable_difference(c, s.level, test="bootstrap"))
                        row["seeds_needed"] = (power.seeds_needed(d["diff_pts"], c, s.level, test="bootstrap")
                                               if v == "tie" else np.nan)
                        row.update(seeds_a=int(arms[a]["final"].shape[0]), seeds_b=int(arms[b]["final"].shape[0]),
                                   n_items=int(arms[a]["final"].shape[1]))
                pair_rows.append(row)
        ranks = stats.rank_tiers({p: float(arms[p]["final"].mean()) for p in names}, better)
        for row in pair_rows:
            row.update(rank_a=ranks[row["arm_a"]], rank_b=ranks[row["arm_b"]], base_acc=arms[row["arm_a"]]["base"])
        rows += pair_rows
    cols = ["model", "dataset", "evalset", "budget", "variant", "ood", "arm_a", "arm_b", "seeds_a", "seeds_b", "n_items",
            "base_acc", "acc_a", "acc_b", "diff_pts", "diff_lo", "diff_hi", "verdict", "detectable_pts", "seeds_needed",
            "rank_a", "rank_b",
            "best_acc_a", "best_acc_b", "best_diff_pts", "best_diff_lo", "best_diff_hi", "best_verdict"]
    if not rows:
        return finish(pd.DataFrame(columns=cols), runs)
    df = pd.DataFrame(rows)[cols]
    # sort like the other tables (model, dataset, test set, arm A, budget, variant), then by arm B
    df = df.assign(policy=df["arm_a"], _rank_b=df["arm_b"].map(policy_rank))
    return finish(sort_arms(df, ["_rank_b"]).drop(columns=["policy", "_rank_b"]).reset_index(drop=True), runs)


def rankings(verdicts: pd.DataFrame) -> pd.DataFrame:
    """One row per arm of each comparison: its final accuracy and rank (ties share a rank)."""
    rows = {}
    for _, v in verdicts.iterrows():
        key = (v["model"], v["dataset"], v["evalset"], v["budget"], v.get("variant", ""))
        for side in ("a", "b"):
            rows[(*key, v[f"arm_{side}"])] = {"model": key[0], "dataset": key[1], "evalset": key[2],
                                              "budget": key[3], "variant": key[4], "ood": v["ood"],
                                              "policy": v[f"arm_{side}"],
                                              "acc": v[f"acc_{side}"], "rank": v[f"rank_{side}"],
                                              "seeds": v[f"seeds_{side}"], "base_acc": v["base_acc"]}
    df = pd.DataFrame(list(rows.values()))
    if "variant" not in verdicts:
        df = df.drop(columns="variant", errors="ignore")
    by = ["model", "dataset", "evalset", "budget"] + (["variant"] if "variant" in df else [])
    return df.sort_values(by + ["rank", "acc"], ascending=[1] * len(by) + [1, 0],
                          kind="stable").reset_index(drop=True) if len(df) else df


FULL_POLICY = "full"
STEPS_TO_MATCH_COLUMNS = ["model", "dataset", "evalset", "ood", "policy", "budget", "variant", "seeds", "n_items", "final_step",
                          "final_acc", "full_seeds", "full_final_step", "full_final_acc", "full_lo", "full_hi",
                          "matched", "match_step", "match_fraction_of_own", "match_fraction_of_full", "acc_at_match",
                          "checkpoint_acc"]


def _checkpoint_accuracy(recs: list[dict], ids: pd.Index) -> tuple[list[int], np.ndarray]:
    """The steps every seed of an arm shares, and the per-item accuracy there: (steps, array steps × seeds × items)."""
    steps = sorted(set.intersection(*[set(r["steps"].columns) for r in recs]))
    if not steps:
        raise ValueError(f"{recs[0]['run'].evals[recs[0]['evalset']]}: the seeds of this arm share no checkpoint")
    mats = np.stack([np.stack([r["steps"].loc[ids, step].to_numpy(float) for r in recs]) for step in steps])
    return [int(x) for x in steps], mats


def steps_to_match(runs: Listing, s: Analysis) -> pd.DataFrame:
    """How soon each arm reaches the accuracy of the full-data arm (policy ``full``, budget ``all``).

    Per model, dataset and test set that has a ``full`` arm: the full arm's final accuracy (mean over its seeds,
    at the last step all of them share) with its bootstrap interval over seeds and items, and for every other arm
    of that model, dataset and test set (whatever its budget): its accuracy at each checkpoint all its seeds share
    (mean over seeds; ``checkpoint_acc``, JSON step → accuracy), the first checkpoint whose accuracy reaches the
    interval's lower bound (``match_step``; NaN and ``matched`` False when none does), that step as a fraction of
    the arm's own final step and of the full arm's final step, the accuracy there and the arm's final accuracy.
    All on the test items every arm of the panel shares. Empty (with its columns) without a ``full`` arm.
    """
    panels: dict[tuple, dict[tuple, list[dict]]] = {}
    for rec in item_records(runs):
        r = rec["run"]
        panels.setdefault((r.model, r.dataset, rec["evalset"], r.variant), {}).setdefault((r.policy, r.budget), []).append(rec)
    rows = []
    for (model, dataset, evalset, variant), arms in panels.items():
        full = arms.get((FULL_POLICY, FULL_LABEL))
        if not full:
            continue
        ids = shared_ids(arms.values())
        full_steps, full_mats = _checkpoint_accuracy(full, ids)
        F = full_mats[-1]
        full_acc = float(F.mean())
        lo, hi = stats.bootstrap_mean_ci(F, s.n_boot, s.seed, s.level)
        for (policy, budget), recs in arms.items():
            if (policy, budget) == (FULL_POLICY, FULL_LABEL):
                continue
            steps, mats = _checkpoint_accuracy(recs, ids)
            accs = mats.reshape(len(steps), -1).mean(axis=1)
            hit = np.flatnonzero(accs >= lo - 1e-12)  # reached: at or above the full arm's lower bound
            match = steps[hit[0]] if len(hit) else np.nan
            rows.append({"model": model, "dataset": dataset, "evalset": evalset, "ood": recs[0]["ood"],
                         "policy": policy, "budget": budget, "variant": variant, "seeds": len(recs), "n_items": len(ids),
                         "final_step": steps[-1], "final_acc": float(accs[-1]), "full_seeds": len(full),
                         "full_final_step": full_steps[-1], "full_final_acc": full_acc, "full_lo": lo, "full_hi": hi,
                         "matched": bool(len(hit)), "match_step": match,
                         "match_fraction_of_own": match / steps[-1], "match_fraction_of_full": match / full_steps[-1],
                         "acc_at_match": float(accs[hit[0]]) if len(hit) else np.nan,
                         "checkpoint_acc": json.dumps({str(st): float(a) for st, a in zip(steps, accs)})})
    if not rows:
        return finish(pd.DataFrame(columns=STEPS_TO_MATCH_COLUMNS), runs)
    return finish(sort_arms(pd.DataFrame(rows, columns=STEPS_TO_MATCH_COLUMNS)).reset_index(drop=True), runs)

"""The aggregate tables as data frames: gains, learnable opportunities, difficulty tiers, out of distribution,
learning curves. Every statistic comes from :mod:`grpo_budget.stats`."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from grpo_budget import stats
from grpo_budget.aggregate.calibration import confident_wrong, spearman_ci
from grpo_budget.errors import UserError
from grpo_budget.experiment.plan import FULL_LABEL, Listing, parse_budget
from grpo_budget.experiment.settings import Analysis
from grpo_budget.prepare.loaders import BENCHMARKS
from grpo_budget.prepare.splits import GENERATORS
from grpo_budget.select.policies import difficulty, select
from grpo_budget.select.sources import labels_bought, ranking_counts

from .read import (
    ARM,
    KEYS,
    _available,
    _base_items,
    _eval_items,
    _policy_rank,
    _read,
    _records,
    _sort_arms,
    as_settings,
    finish,
)


def compare(base: np.ndarray, trained: np.ndarray, s: Analysis | dict) -> dict:
    """Base vs trained per-item scores on the same items: accuracies, gain and their intervals.

    ``base``: (items,); ``trained``: (items,) for one seed or (seeds, items) for several.
    """
    s = as_settings(s)
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


def summary_table(runs: Listing, settings: Analysis | dict) -> pd.DataFrame:
    """One row per run and evaluation set: base, final and best accuracy, paired-bootstrap gain, learnability."""
    s = as_settings(settings)
    rows = []
    learn = {id(r): _learnable_row(r, runs, s) for r in runs.runs}
    for rec in _records(runs):
        r, steps = rec["run"], rec["steps"]
        by_step = steps.mean()
        final_step, best_step = int(by_step.index.max()), int(by_step.idxmax())
        c = compare(rec["base"].to_numpy(), steps[final_step].to_numpy(), s)
        subset = _read(r.subset, _available(r.subset, ["pass_rate", "scoring_labels"]))
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
    return finish(_sort_arms(pd.DataFrame(rows), ["seed"]).reset_index(drop=True), runs)


def _records_by_arm(runs: Listing) -> dict[tuple, list[dict]]:
    """The records of :func:`_records` grouped by arm (model, dataset, policy, budget) and evaluation set."""
    groups: dict[tuple, list[dict]] = {}
    for rec in _records(runs):
        groups.setdefault((*[getattr(rec["run"], k) for k in ARM], rec["evalset"]), []).append(rec)
    return groups


def gains_over_seeds(runs: Listing, settings: Analysis | dict) -> pd.DataFrame:
    """One row per arm and evaluation set: means over seeds, std over seeds, intervals over seeds and items."""
    s = as_settings(settings)
    groups = _records_by_arm(runs)
    rows = []
    for key, recs in groups.items():
        base = recs[0]["base"]
        finals = np.stack([rec["steps"][rec["steps"].columns.max()].loc[base.index].to_numpy() for rec in recs])
        best = [rec["steps"].mean().max() for rec in recs]
        c = compare(base.to_numpy(), finals, s)
        bought = [labels_bought(_read(rec["run"].subset, _available(rec["run"].subset, ["id", "scoring_labels"])))
                  ["total"] for rec in recs]
        rows.append({**dict(zip(ARM + ["evalset"], key)), "ood": recs[0]["ood"], "n_test": c["n_items"],
                     "n_seeds": c["n_seeds"], "labels_bought": float(np.mean(bought)), "base_acc": c["base_acc"], "final_acc": c["final_acc"],
                     "final_sd": c["final_sd"], "best_acc": float(np.mean(best)), "gain_pts": c["gain_pts"],
                     "gain_sd": c["gain_sd"], "gain_lo": c["gain_lo"], "gain_hi": c["gain_hi"],
                     "rel_gain": c["rel_gain"]})
    return finish(_sort_arms(pd.DataFrame(rows)).reset_index(drop=True), runs)




def _fresh_counts(runs: Listing, r) -> pd.DataFrame | None:
    """The verification's fresh counts of this run's model and dataset (indexed by id), where it ran."""
    path = next((v.path for v in runs.verify if (v.model, v.dataset) == (r.model, r.dataset)), None)
    return _read(path, ["id", "n_samples", "n_correct"]).set_index("id") if path else None


def _learnable_row(r, runs: Listing, s: Analysis) -> dict:
    """Predicted learnable share of one run's subset three ways, and the share observed at the start of training.

    plug-in: 1 − pᴳ − (1 − p)ᴳ at the scored pass rate; posterior: its expectation under each item's
    empirical-Bayes posterior (the pool's fitted Beta prior updated with the item's k of K); fresh: the same
    posterior from the verification's new samples instead of the scoring ones, which the selection did not pick on.
    The table leads with fresh where it exists, else posterior. G and the groups per step are the run's own (a
    sweep variant's where it sweeps them).
    """
    G = int(runs.training_value(r, "num_generations"))
    groups = int(runs.training_value(r, "prompts_per_step"))
    cols = ["id", "pass_rate", "n_samples", "n_correct", "eb_prior_a", "eb_prior_b"]
    subset = _read(r.subset, _available(r.subset, cols))
    plugin = stats.expected_learnable_share(subset["pass_rate"].to_numpy(), G)
    has_prior = {"eb_prior_a", "eb_prior_b", "n_correct", "n_samples"} <= set(subset.columns) and bool(
        np.isfinite(subset[["eb_prior_a", "eb_prior_b", "n_correct"]].to_numpy(float)).all())  # unlabeled: NaN
    posterior = fresh = np.nan
    if has_prior:
        a0, b0 = subset["eb_prior_a"].to_numpy(float), subset["eb_prior_b"].to_numpy(float)
        k, n = subset["n_correct"].to_numpy(float), subset["n_samples"].to_numpy(float)
        posterior = float(np.mean(stats.expected_learnable_beta(a0 + k, b0 + n - k, G)))
        fc = _fresh_counts(runs, r)
        if fc is not None:
            f = fc.reindex(subset["id"])
            if f["n_samples"].notna().all():
                kf, nf = f["n_correct"].to_numpy(float), f["n_samples"].to_numpy(float)
                fresh = float(np.mean(stats.expected_learnable_beta(a0 + kf, b0 + nf - kf, G)))
    lead, lead_name = (fresh, "fresh") if np.isfinite(fresh) else (posterior, "posterior") if np.isfinite(posterior) \
        else (plugin, "plug-in")
    log = _read(r.log)
    learn = stats.learnable_from_log(log) if "frac_reward_zero_std" in log else pd.DataFrame(columns=["learnable"])
    n = stats.window_steps(len(learn), s.learnable_window)
    first = float(learn["learnable"].iloc[:n].mean()) if n else np.nan
    lo, hi = stats.wilson_interval(first, n * groups, s.level)
    return {**{k: getattr(r, k) for k in KEYS}, "subset_size": len(subset), "G": G, "logged_steps": len(learn),
            "window_steps": n, "window_groups": n * groups,
            "predicted_pct": 100 * lead, "predicted_from": lead_name, "predicted_plugin_pct": 100 * plugin,
            "predicted_posterior_pct": 100 * posterior, "predicted_fresh_pct": 100 * fresh,
            "observed_first_pct": 100 * first, "observed_lo": 100 * lo, "observed_hi": 100 * hi,
            "observed_all_pct": 100 * float(learn["learnable"].mean()) if len(learn) else np.nan,
            "diff_pts": 100 * (first - lead),
            "predicted_in_interval": bool(lo <= lead <= hi) if np.isfinite(lo) else False}


def learnable_table(runs: Listing, settings: Analysis | dict) -> pd.DataFrame:
    """Per run: predicted share of groups with non-zero reward std vs the share observed over the first steps.

    ``observed_first_pct`` is the mean of 1 − frac_reward_zero_std over the first ``window_steps`` logged steps
    (``analysis.learnable_window``); ``observed_lo``/``observed_hi`` a Wilson interval over those steps' groups
    (prompts_per_step per step); ``observed_all_pct`` the mean over all steps (the paper's "learnable %").
    """
    s = as_settings(settings)
    table = _sort_arms(pd.DataFrame([_learnable_row(r, runs, s) for r in runs.runs]), ["seed"]).reset_index(drop=True)
    return finish(table, runs)




# Difficulty metadata the datasets carry (from the registries), in the order `stratify_by: auto` tries them.
METADATA_TIERS = tuple(dict.fromkeys([b.difficulty for b in BENCHMARKS.values() if b.difficulty]
                                     + [g.difficulty for g in GENERATORS.values()] + ["difficulty"]))
BASE_PASS_RATE = "base_pass_rate"


def stratify_setting(evalset: str, setting: str | dict) -> str:
    return setting.get(evalset, "auto") if isinstance(setting, dict) else setting


def _fmt_value(v) -> str:
    if isinstance(v, (float, np.floating)) and float(v).is_integer():
        return str(int(v))
    return str(v)


def tiers(test: pd.DataFrame, base: pd.DataFrame, how: str) -> tuple[pd.Series, list[str], str]:
    """Difficulty tier of each test item: ``(tier per id, the tiers in their natural order, what they come from)``.

    ``how``: ``auto`` (the first metadata column of :data:`METADATA_TIERS` the test set has with a known value on
    some item, else the base pass rate), ``base_pass_rate``, or a column of the test Parquet. A column with at most
    8 distinct values gives one tier per value; more gives quartiles. ``base_pass_rate`` uses the base model's
    per-item accuracy: with at most 8 samples per item each k/n is a tier, otherwise 0, (0, ⅓], (⅓, ⅔], (⅔, 1), 1.
    """
    if how == "auto":
        how = next((c for c in METADATA_TIERS if c in test.columns and test[c].notna().any()), BASE_PASS_RATE)
    if how == BASE_PASS_RATE:
        b = base.set_index("id")
        n = int(b["n_samples"].max()) if "n_samples" in b else 0
        if 0 < n <= 8 and "n_correct" in b and (b["n_samples"] == n).all():
            values = b["n_correct"].astype(int)
            order = [f"{k}/{n}" for k in range(n + 1)]
            tier = values.map(lambda k: f"{k}/{n}")
        else:
            acc = b["accuracy"]
            order = ["0", "(0, ⅓]", "(⅓, ⅔]", "(⅔, 1)", "1"]
            tier = pd.Series(np.select([acc <= 0, acc <= 1 / 3, acc <= 2 / 3, acc < 1], order[:4], order[4]),
                             index=acc.index)
        order = [o for o in order if (tier == o).any()]
        return tier.rename("tier"), order, "base pass rate"
    if how not in test.columns:
        raise UserError(f"analysis.stratify_by: the test set has no column {how!r}; allowed: auto, base_pass_rate, "
                        f"or one of {', '.join(test.columns)}")
    col = test.set_index("id")[how]
    known = col.dropna()
    if known.nunique() <= 8:
        values = sorted(known.unique(), key=lambda v: (not isinstance(v, (int, float, np.number)), v))
        order = [f"{how} {_fmt_value(v)}" for v in values]
        tier = col.map(lambda v: "missing" if pd.isna(v) else f"{how} {_fmt_value(v)}")
    else:
        cut = pd.qcut(pd.to_numeric(col), 4, duplicates="drop")
        order = [f"{how} {c}" for c in cut.cat.categories]
        tier = cut.astype(object).map(lambda c: "missing" if pd.isna(c) else f"{how} {c}")
    if (tier == "missing").any():
        order.append("missing")
    return tier.rename("tier"), order, how


def _truncation(path: str, step: int) -> pd.DataFrame | None:
    """Per item (index id) at one step of an evaluation file: ``n_samples`` and ``n_truncated`` (completions cut at
    max_new_tokens); None where the file has no ``n_truncated`` column."""
    cols = _available(path, ["id", "step", "n_samples", "n_truncated"])
    if not {"n_samples", "n_truncated"} <= set(cols):
        return None
    ev = _read(path, cols)
    return ev[ev["step"] == step].set_index("id")[["n_samples", "n_truncated"]]


def _truncated_counts(counts: pd.DataFrame | None, ids: pd.Index) -> tuple[float, float]:
    """(truncated, samples) summed over ``ids``; NaN where unknown for any of them."""
    if counts is None:
        return np.nan, np.nan
    c = counts.reindex(ids)
    if c.isna().any().any():
        return np.nan, np.nan
    return float(c["n_truncated"].sum()), float(c["n_samples"].sum())


def _truncated_share(counts: list[tuple[float, float]]) -> float:
    """Pooled share of truncated completions over (truncated, samples) pairs (NaN if any is unknown)."""
    k = sum(c[0] for c in counts)
    n = sum(c[1] for c in counts)
    return float(k / n) if np.isfinite(k) and np.isfinite(n) and n > 0 else np.nan


def _tier_records(runs: Listing, s: dict) -> list[dict]:
    """Per run, evaluation set and tier: the base and final per-item accuracy, and the (truncated, samples) counts
    of the base model's and the final checkpoint's completions on the tier's items (NaN without ``n_truncated``)."""
    base = _base_items(runs)
    out = []
    cache: dict[str, tuple] = {}
    base_trunc: dict[tuple, pd.DataFrame | None] = {}
    for rec in _records(runs):
        r, evalset = rec["run"], rec["evalset"]
        if evalset not in cache:
            test = _read(runs.tests[evalset])
            b = _eval_items(base[(r.model, evalset)])
            cache[evalset] = tiers(test, b[b["step"] == 0], stratify_setting(evalset, s.stratify_by))
        if (r.model, evalset) not in base_trunc:
            base_trunc[(r.model, evalset)] = _truncation(base[(r.model, evalset)], 0)
        tier, order, source = cache[evalset]
        final_step = rec["steps"].columns.max()
        final = rec["steps"][final_step]
        final_trunc = _truncation(r.evals[evalset], final_step)
        t = tier.reindex(rec["base"].index)
        for i, name in enumerate(order):
            mask = (t == name).to_numpy()
            if mask.any():
                ids = rec["base"].index[mask]
                out.append({"run": r, "evalset": evalset, "stratify_by": source, "tier": name, "tier_order": i,
                            "base": rec["base"][mask], "final": final[mask],
                            "base_truncated": _truncated_counts(base_trunc[(r.model, evalset)], ids),
                            "final_truncated": _truncated_counts(final_trunc, ids)})
    return out


def difficulty_table(runs: Listing, settings: Analysis | dict, over_seeds: bool = False) -> pd.DataFrame:
    """Accuracy of the base model and of each arm's final checkpoint per difficulty tier of the test items.

    Per seed (default) or per arm over seeds (``over_seeds``), with bootstrap intervals. ``truncated_share`` and
    ``base_truncated_share``: the share of the final checkpoint's (pooled over seeds) and of the base model's
    completions on the tier's items that were cut at max_new_tokens (NaN where the evaluation files have no
    ``n_truncated``).
    """
    s = as_settings(settings)
    recs = _tier_records(runs, s)
    groups: dict[tuple, list[dict]] = {}
    for rec in recs:
        keys = KEYS if not over_seeds else ARM
        groups.setdefault((*[getattr(rec["run"], k) for k in keys], rec["evalset"], rec["tier"]), []).append(rec)
    rows = []
    for key, rs in groups.items():
        base = rs[0]["base"]
        c = compare(base.to_numpy(), np.stack([x["final"].loc[base.index].to_numpy() for x in rs]), s)
        keys = KEYS if not over_seeds else ARM
        rows.append({**dict(zip(keys + ["evalset", "tier"], key)), "stratify_by": rs[0]["stratify_by"],
                     "tier_order": rs[0]["tier_order"], **c,
                     "base_truncated_share": _truncated_share([rs[0]["base_truncated"]]),
                     "truncated_share": _truncated_share([x["final_truncated"] for x in rs])})
    cols = ["tier_order"] + (["seed"] if not over_seeds else [])
    return finish(_sort_arms(pd.DataFrame(rows), cols).reset_index(drop=True), runs)




def ood_table(runs: Listing, settings: Analysis | dict, over_seeds: bool = False) -> pd.DataFrame:
    """Base vs final-checkpoint pass@k on every evaluation set other than the training set (``ood``).

    k runs over 1 and the number of samples per item (the smallest over base and trained evaluations).
    Empty (with its columns) when no dataset lists ``ood`` sets.
    """
    s = as_settings(settings)
    base = _base_items(runs)
    groups: dict[tuple, list] = {}
    for r in runs.runs:
        for evalset, path in r.evals.items():
            if evalset == r.dataset:
                continue
            b = _eval_items(base[(r.model, evalset)])
            b = b[b["step"] == 0].set_index("id").sort_index()
            t = _eval_items(path)
            final_step = int(t["step"].max())
            t = t[t["step"] == final_step].set_index("id").reindex(b.index)
            if t["n_samples"].isna().any():
                raise ValueError(f"{path}: base test items missing at step {final_step}")
            keys = KEYS if not over_seeds else ARM
            groups.setdefault((*[getattr(r, k) for k in keys], evalset), []).append((b, t, final_step))
    rows = []
    for key, rs in groups.items():
        b = rs[0][0]
        n = int(min(b["n_samples"].min(), *(t["n_samples"].min() for _, t, _ in rs)))
        for k in sorted({1, n}):
            c = compare(stats.pass_at_k_items(b, k), np.stack([stats.pass_at_k_items(t, k) for _, t, _ in rs]), s)
            keys = KEYS if not over_seeds else ARM
            rows.append({**dict(zip(keys + ["evalset"], key)), "k": k, "n_samples": n,
                         "final_step": rs[0][2], **c})
    cols = KEYS + ["evalset", "k", "n_samples", "final_step", "n_seeds", "n_items", "base_acc", "final_acc",
                   "gain_pts", "gain_lo", "gain_hi"]
    if not rows:
        return finish(pd.DataFrame(columns=[c for c in cols if c != "seed" or not over_seeds]), runs)
    return finish(_sort_arms(pd.DataFrame(rows), ["k"] + (["seed"] if not over_seeds else [])).reset_index(drop=True),
                  runs)




def curves(runs: Listing, settings: Analysis | dict | None = None) -> pd.DataFrame:
    """Accuracy per checkpoint for every arm and evaluation set (mean over seeds) with its interval; the base
    model is step 0 (items resampled)."""
    s = as_settings(settings)
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
    return finish(_sort_arms(pd.DataFrame(rows), ["step"]).reset_index(drop=True), runs)


# ---------------------------------------------------------------------------------------------------------------
# Arm against arm


def _arms(runs: Listing) -> dict[tuple, dict[str, dict]]:
    """Per (model, dataset, evalset, budget, variant) and policy: per-item accuracy (seeds × items) at the final
    checkpoint and at each seed's best checkpoint, on the items every arm shares."""
    groups: dict[tuple, dict[str, list[dict]]] = {}
    for rec in _records(runs):
        r = rec["run"]
        groups.setdefault((r.model, r.dataset, rec["evalset"], r.budget, r.variant), {}).setdefault(r.policy, []).append(rec)
    out = {}
    for key, by_policy in groups.items():
        ids = None
        for recs in by_policy.values():
            for rec in recs:
                ids = rec["steps"].index if ids is None else ids.intersection(rec["steps"].index)
        arms = {}
        for policy, recs in by_policy.items():
            steps = [rec["steps"].loc[ids] for rec in recs]
            arms[policy] = {"final": np.stack([st[st.columns.max()].to_numpy() for st in steps]),
                            "best": np.stack([st[st.mean().idxmax()].to_numpy() for st in steps]),
                            "base": float(recs[0]["base"].loc[ids].mean()), "ood": recs[0]["ood"]}
        out[key] = arms
    return out


def verdict_table(runs: Listing, settings: Analysis | dict) -> pd.DataFrame:
    """Every pair of policies on the same model, dataset, test set and budget: the difference in final (and
    best-checkpoint) accuracy, A − B in points, with a paired bootstrap interval over test items (and over each
    arm's seeds when it has several), the verdict, and each arm's rank (1 + the arms distinguishably better).
    With a sweep, policies are compared within each variant (the ``variant`` column)."""
    s = as_settings(settings)
    rows = []
    for (model, dataset, evalset, budget, variant), arms in _arms(runs).items():
        names = sorted(arms, key=_policy_rank)
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
                        row.update(seeds_a=int(arms[a]["final"].shape[0]), seeds_b=int(arms[b]["final"].shape[0]),
                                   n_items=int(arms[a]["final"].shape[1]))
                pair_rows.append(row)
        ranks = stats.rank_tiers({p: float(arms[p]["final"].mean()) for p in names}, better)
        for row in pair_rows:
            row.update(rank_a=ranks[row["arm_a"]], rank_b=ranks[row["arm_b"]], base_acc=arms[row["arm_a"]]["base"])
        rows += pair_rows
    cols = ["model", "dataset", "evalset", "budget", "variant", "ood", "arm_a", "arm_b", "seeds_a", "seeds_b", "n_items",
            "base_acc", "acc_a", "acc_b", "diff_pts", "diff_lo", "diff_hi", "verdict", "rank_a", "rank_b",
            "best_acc_a", "best_acc_b", "best_diff_pts", "best_diff_lo", "best_diff_hi", "best_verdict"]
    if not rows:
        return finish(pd.DataFrame(columns=cols), runs)
    df = pd.DataFrame(rows)[cols]
    # sort like the other tables (model, dataset, test set, arm A, budget, variant), then by arm B
    df = df.assign(policy=df["arm_a"], _rank_b=df["arm_b"].map(_policy_rank))
    return finish(_sort_arms(df, ["_rank_b"]).drop(columns=["policy", "_rank_b"]).reset_index(drop=True), runs)


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


# ---------------------------------------------------------------------------------------------------------------
# Steps to match the full-data arm

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


def steps_to_match(runs: Listing, settings: Analysis | dict) -> pd.DataFrame:
    """How soon each arm reaches the accuracy of the full-data arm (policy ``full``, budget ``all``).

    Per model, dataset and test set that has a ``full`` arm: the full arm's final accuracy (mean over its seeds,
    at the last step all of them share) with its bootstrap interval over seeds and items, and for every other arm
    of that model, dataset and test set (whatever its budget): its accuracy at each checkpoint all its seeds share
    (mean over seeds; ``checkpoint_acc``, JSON step → accuracy), the first checkpoint whose accuracy reaches the
    interval's lower bound (``match_step``; NaN and ``matched`` False when none does), that step as a fraction of
    the arm's own final step and of the full arm's final step, the accuracy there and the arm's final accuracy.
    All on the test items every arm of the panel shares. Empty (with its columns) without a ``full`` arm.
    """
    s = as_settings(settings)
    panels: dict[tuple, dict[tuple, list[dict]]] = {}
    for rec in _records(runs):
        r = rec["run"]
        panels.setdefault((r.model, r.dataset, rec["evalset"], r.variant), {}).setdefault((r.policy, r.budget), []).append(rec)
    rows = []
    for (model, dataset, evalset, variant), arms in panels.items():
        full = arms.get((FULL_POLICY, FULL_LABEL))
        if not full:
            continue
        ids = None
        for recs in arms.values():
            for rec in recs:
                ids = rec["steps"].index if ids is None else ids.intersection(rec["steps"].index)
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
    return finish(_sort_arms(pd.DataFrame(rows, columns=STEPS_TO_MATCH_COLUMNS)).reset_index(drop=True), runs)


CALIBRATED_POLICIES = ("hard", "medium", "easy")


def label_free_calibration(runs: Listing, settings: Analysis | dict) -> pd.DataFrame:
    """How well each label-free or proxy difficulty source stands in for the gold pass rate, per model × dataset
    whose pool has gold answers (long form: one row per source and measure).

    - ``rho``: Spearman ρ between the source and the trained model's gold pass rate over the pool, with a
      percentile bootstrap interval over items (answer entropy enters negated, so that higher = easier throughout).
    - ``overlap``: the share of the label-selected subset that the same policy picks by the source, at each budget
      of the runs (tie-break seed: the runs' first).
    - ``confident_wrong``: by gold pass-rate tier, the share of items whose majority answer is wrong though more
      than half the samples give it (proxy_agreement: the proxy's majority, tiers by its own pass rate).
    """
    s = as_settings(settings)
    proxies = {p.dataset: p.path for p in runs.proxy_scores}
    budgets = sorted({r.budget for r in runs.runs if r.budget != FULL_LABEL}, key=lambda b: float(parse_budget(b)))
    seed = min((r.seed for r in runs.runs), default=0)
    cols = ["id", "n_samples", "n_correct", "pass_rate", "pass_rate_eb", "answers", "correct", "majority_answer",
            "n_agree", "agreement", "answer_entropy"]
    rows = []
    for sc in runs.scores:
        gold = _read(sc.path, _available(sc.path, cols))
        if "agreement" not in gold or gold["pass_rate"].isna().all():
            continue  # scored before label-free difficulty, or an unlabeled pool: nothing to check against
        truth = difficulty(gold)
        signals = {"agreement": ranking_counts(gold, "agreement"), "answer_entropy": None}
        proxy = None
        if sc.dataset in proxies:
            proxy = _read(proxies[sc.dataset], _available(proxies[sc.dataset], cols)).set_index("id").loc[gold["id"]]
            proxy = proxy.reset_index()
            signals.update(proxy=proxy, proxy_agreement=ranking_counts(proxy, "agreement"))
        key = {"model": sc.model, "dataset": sc.dataset}
        # The label-selected subsets every source is compared with, once per budget and policy.
        wanted = {(budget, policy): set(select(gold, policy, parse_budget(budget), seed)["id"])
                  for budget in budgets for policy in CALIBRATED_POLICIES}
        for source, table in signals.items():
            values = -gold["answer_entropy"].to_numpy(float) if source == "answer_entropy" else difficulty(table)
            rho, lo, hi = spearman_ci(values, truth, min(s.n_boot, 1000), s.seed, s.level)
            rows.append({**key, "source": source, "measure": "rho", "at": "", "value": rho, "lo": lo, "hi": hi,
                         "items": len(gold)})
            if table is None:
                continue
            for (budget, policy), want in wanted.items():
                got = set(select(table, policy, parse_budget(budget), seed)["id"])
                rows.append({**key, "source": source, "measure": "overlap", "at": f"{policy} @ {budget}",
                             "value": len(want & got) / len(want), "lo": np.nan, "hi": np.nan, "items": len(want)})
        for source, table in (("agreement", gold), ("proxy_agreement", proxy)):
            if table is None:
                continue
            for _, t in confident_wrong(table).iterrows():
                rows.append({**key, "source": source, "measure": "confident_wrong", "at": f"tier {t['tier']}",
                             "value": t["confident_wrong"], "lo": t["lo"], "hi": t["hi"], "items": t["items"]})
    return pd.DataFrame(rows, columns=["model", "dataset", "source", "measure", "at", "value", "lo", "hi", "items"])

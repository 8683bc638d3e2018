"""Aggregate stage: tables and figures from the cached outputs of every run.

The workflow passes a JSON listing of runs and their files (see ``runs_listing`` in ``common.smk``); each output
kind is its own function (:data:`OUTPUTS`) so that each table or figure is its own Snakemake target, and each reads
only the files its job lists as inputs.

Conventions (see also :mod:`grpo_budget.stats`)
-----------------------------------------------
* Accuracies are fractions; gains are in percentage points; relative gains are fractions of the base model's
  headroom, ``(trained - base) / (1 - base)``.
* Intervals are percentile bootstrap intervals at ``settings["level"]``. With one seed they resample test items
  (paired: the same items for base and trained). With several seeds of an arm they resample seeds *and* test items
  (a two-stage bootstrap), so they cover both the item sampling and the seed-to-seed spread.
* Per-seed rows go to the CSV files; Markdown and HTML show one row per arm (mean over seeds, ± = std over seeds).
"""

from __future__ import annotations

import html
import math
import os
from collections.abc import Callable, Sequence
from functools import lru_cache
from pathlib import Path
from statistics import NormalDist

import numpy as np
import pandas as pd

from . import stats
from .io import atomic_path, read_json, write_text

KEYS = ["model", "dataset", "policy", "budget", "seed"]
ARM = ["model", "dataset", "policy", "budget"]
PANEL = ["model", "dataset", "evalset"]
POLICY_ORDER = ["hard", "medium", "easy", "random", "full", "tiers", "random_matched"]
POLICY_COLORS = {"hard": "#d62728", "medium": "#2ca02c", "easy": "#1f77b4", "random": "#ff7f0e",
                 "full": "#555555", "tiers": "#9467bd", "random_matched": "#8c564b"}
BUDGET_STYLES = ["-", "--", ":", "-."]
# Difficulty metadata the datasets carry, in the order `stratify_by: auto` tries them.
METADATA_TIERS = ("level", "n_objects", "n_ops", "n_steps", "difficulty")
BASE_PASS_RATE = "base_pass_rate"
DEFAULTS = {"n_boot": 2000, "level": 0.95, "seed": 0, "learnable_window": 0.1, "stratify_by": "auto"}


def _settings(settings: dict | None) -> dict:
    return {**DEFAULTS, **(settings or {})}


# ---------------------------------------------------------------------------------------------------------------
# Reading


@lru_cache(maxsize=256)
def _read_cached(path: str, columns: tuple | None, _stamp: tuple) -> pd.DataFrame:
    return pd.read_parquet(path, columns=list(columns) if columns else None)


def _read(path: str, columns: Sequence[str] | None = None) -> pd.DataFrame:
    """A Parquet file (cached per path, columns and modification time; do not modify the result)."""
    st = os.stat(path)
    return _read_cached(str(path), tuple(columns) if columns else None, (st.st_mtime_ns, st.st_size))


def _available(path: str, wanted: Sequence[str]) -> list[str]:
    import pyarrow.parquet as pq

    names = set(pq.read_schema(path).names)
    return [c for c in wanted if c in names]


def _eval_items(path: str) -> pd.DataFrame:
    """An evaluation file as rows (id, step) with accuracy and, where present, n_samples and n_correct."""
    cols = _available(path, ["id", "step", "accuracy", "n_samples", "n_correct"])
    return _read(path, cols)


def _by_step(path: str) -> pd.DataFrame:
    """Per-item accuracy of an evaluation file: index id, one column per step."""
    ev = _eval_items(path)
    return ev.pivot(index="id", columns="step", values="accuracy").sort_index()


def _base_items(runs: dict) -> dict:
    return {(b["model"], b["evalset"]): b["eval"] for b in runs["base"]}


def _label(r: dict) -> str:
    return f"{r['policy']} @ {r['budget']}"


def _policy_rank(policy: str) -> int:
    return POLICY_ORDER.index(policy) if policy in POLICY_ORDER else len(POLICY_ORDER)


def _sort_arms(df: pd.DataFrame, extra: Sequence[str] = ()) -> pd.DataFrame:
    if df.empty:
        return df
    tmp = {"_policy_rank": df["policy"].map(_policy_rank)}
    if "evalset" in df:  # the training set's own test set first, then the out-of-distribution sets
        tmp["_ood"] = df["evalset"] != df["dataset"]
    cols = ["model", "dataset"] + (["_ood", "evalset"] if "evalset" in df else []) + ["_policy_rank", "budget"]
    cols += [c for c in extra if c in df]
    return df.assign(**tmp).sort_values(cols, kind="stable").drop(columns=list(tmp))


# ---------------------------------------------------------------------------------------------------------------
# Intervals


def _interval(mat: np.ndarray, s: dict) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of ``mat`` (seeds × items).

    One seed: items resampled (:func:`stats.bootstrap_ci`). Several: seeds and items resampled (two-stage; the
    same item draw applies to every seed, since all seeds are evaluated on the same test items).
    """
    mat = np.atleast_2d(np.asarray(mat, dtype=float))
    if mat.shape[0] == 1:
        _, lo, hi = stats.bootstrap_ci(mat[0], n_boot=s["n_boot"], seed=s["seed"], level=s["level"])
        return lo, hi
    S, N = mat.shape
    rng = np.random.default_rng(s["seed"])
    chunk = max(1, 1_000_000 // (S * N))
    boots, done = [], 0
    while done < s["n_boot"]:
        b = min(chunk, s["n_boot"] - done)
        per_seed = mat[:, rng.integers(0, N, size=(b, N))].mean(axis=2)  # (S, b)
        pick = rng.integers(0, S, size=(b, S))
        boots.append(per_seed[pick, np.arange(b)[:, None]].mean(axis=1))
        done += b
    alpha = (1 - s["level"]) / 2
    lo, hi = np.quantile(np.concatenate(boots), [alpha, 1 - alpha])
    return float(lo), float(hi)


def compare(base: np.ndarray, trained: np.ndarray, s: dict) -> dict:
    """Base vs trained per-item scores on the same items: accuracies, gain and their intervals.

    ``base``: (items,); ``trained``: (items,) for one seed or (seeds, items) for several.
    """
    s = _settings(s)
    B = np.asarray(base, dtype=float)
    T = np.atleast_2d(np.asarray(trained, dtype=float))
    S = T.shape[0]
    base_lo, base_hi = _interval(B[None], s)
    final_lo, final_hi = _interval(T, s)
    seed_gains = 100 * (T.mean(axis=1) - B.mean())
    out = {"n_seeds": S, "n_items": B.size, "base_acc": float(B.mean()), "base_lo": base_lo, "base_hi": base_hi,
           "final_acc": float(T.mean()), "final_lo": final_lo, "final_hi": final_hi,
           "final_sd": float(T.mean(axis=1).std(ddof=1)) if S > 1 else np.nan,
           "gain_pts": float(seed_gains.mean()), "gain_sd": float(seed_gains.std(ddof=1)) if S > 1 else np.nan}
    if S == 1:
        g = stats.paired_bootstrap_gain(B, T[0], n_boot=s["n_boot"], seed=s["seed"], level=s["level"])
        out.update(gain_lo=g["gain_lo"], gain_hi=g["gain_hi"], rel_gain=g["rel_gain"],
                   rel_gain_lo=g["rel_gain_lo"], rel_gain_hi=g["rel_gain_hi"])
    else:
        lo, hi = _interval(100 * (T - B[None]), s)
        out.update(gain_lo=lo, gain_hi=hi, rel_gain=stats.relative_gain(B.mean(), T.mean()),
                   rel_gain_lo=np.nan, rel_gain_hi=np.nan)
    return out


# ---------------------------------------------------------------------------------------------------------------
# Gains (the summary)


def _records(runs: dict) -> list[dict]:
    """Per run and evaluation set: base and per-checkpoint per-item accuracy on the common items."""
    base = _base_items(runs)
    out = []
    for r in runs["runs"]:
        for evalset, path in r["evals"].items():
            b = _by_step(base[(r["model"], evalset)])[0]
            t = _by_step(path)
            ids = b.index.intersection(t.index)
            if len(ids) < len(b):
                raise ValueError(f"{path}: {len(b) - len(ids)} of the base model's test items are missing")
            out.append({"run": r, "evalset": evalset, "ood": evalset != r["dataset"], "base": b.loc[ids],
                        "steps": t.loc[ids]})
    return out


def summary_table(runs: dict, settings: dict) -> pd.DataFrame:
    """One row per run and evaluation set: base, final and best accuracy, paired-bootstrap gain, learnability."""
    s = _settings(settings)
    G = int(runs.get("num_generations", 8))
    rows = []
    learn = {id(r): _learnable_row(r, runs, s) for r in runs["runs"]}
    for rec in _records(runs):
        r, steps = rec["run"], rec["steps"]
        by_step = steps.mean()
        final_step, best_step = int(by_step.index.max()), int(by_step.idxmax())
        c = compare(rec["base"].to_numpy(), steps[final_step].to_numpy(), s)
        subset = _read(r["subset"], ["pass_rate"])
        lr = learn[id(r)]
        rows.append({
            **{k: r[k] for k in KEYS}, "evalset": rec["evalset"], "ood": rec["ood"], "n_test": c["n_items"],
            "subset_size": len(subset), "subset_mean_pass_rate": subset["pass_rate"].mean(),
            "base_acc": c["base_acc"], "final_step": final_step, "final_acc": c["final_acc"],
            "best_step": best_step, "best_acc": float(by_step.max()),
            "gain_pts": c["gain_pts"], "gain_lo": c["gain_lo"], "gain_hi": c["gain_hi"],
            "best_gain_pts": 100 * (float(by_step.max()) - c["base_acc"]),
            "rel_gain": c["rel_gain"], "rel_gain_lo": c["rel_gain_lo"], "rel_gain_hi": c["rel_gain_hi"],
            "learnable_pct": lr["observed_all_pct"],
            "predicted_learnable_pct": 100 * stats.expected_learnable_share(subset["pass_rate"].to_numpy(), G),
        })
    return _sort_arms(pd.DataFrame(rows), ["seed"]).reset_index(drop=True)


def gains_over_seeds(runs: dict, settings: dict) -> pd.DataFrame:
    """One row per arm and evaluation set: means over seeds, std over seeds, intervals over seeds and items."""
    s = _settings(settings)
    groups: dict[tuple, list[dict]] = {}
    for rec in _records(runs):
        groups.setdefault((*[rec["run"][k] for k in ARM], rec["evalset"]), []).append(rec)
    rows = []
    for key, recs in groups.items():
        base = recs[0]["base"]
        finals = np.stack([rec["steps"][rec["steps"].columns.max()].loc[base.index].to_numpy() for rec in recs])
        best = [rec["steps"].mean().max() for rec in recs]
        c = compare(base.to_numpy(), finals, s)
        rows.append({**dict(zip(ARM + ["evalset"], key)), "ood": recs[0]["ood"], "n_test": c["n_items"],
                     "n_seeds": c["n_seeds"], "base_acc": c["base_acc"], "final_acc": c["final_acc"],
                     "final_sd": c["final_sd"], "best_acc": float(np.mean(best)), "gain_pts": c["gain_pts"],
                     "gain_sd": c["gain_sd"], "gain_lo": c["gain_lo"], "gain_hi": c["gain_hi"],
                     "rel_gain": c["rel_gain"]})
    return _sort_arms(pd.DataFrame(rows)).reset_index(drop=True)


# ---------------------------------------------------------------------------------------------------------------
# Learnable opportunities


def window_steps(n_logged: int, window: float | int) -> int:
    """How many of the first logged steps the comparison uses: a count (int) or a fraction (float, rounded half
    up, at least one step)."""
    if n_logged <= 0:
        return 0
    if isinstance(window, float):
        return max(1, min(n_logged, math.floor(window * n_logged + 0.5)))
    return max(1, min(n_logged, int(window)))


def posterior_learnable(n_correct: np.ndarray, n_samples: np.ndarray, G: int) -> float:
    """Expected learnable share when each item's pass rate is uncertain: the mean over items of
    E[1 - p^G - (1 - p)^G] under p ~ Beta(c + ½, n - c + ½) (Jeffreys prior, c of n samples correct).

    The plug-in prediction is exactly 0 for every item scored 0/K or K/K, though such items still produce mixed
    groups now and then; this version gives them their posterior share.
    """
    c = np.asarray(n_correct, dtype=float)
    n = np.asarray(n_samples, dtype=float)
    a, b = c + 0.5, n - c + 0.5
    j = np.arange(G)[:, None]
    e_pG = np.prod((a + j) / (a + b + j), axis=0)  # E[p^G] = B(a + G, b) / B(a, b)
    e_qG = np.prod((b + j) / (a + b + j), axis=0)
    return float(np.mean(1 - e_pG - e_qG))


def _wilson(share: float, n: float, level: float) -> tuple[float, float]:
    if not n or not np.isfinite(share):
        return np.nan, np.nan
    z = NormalDist().inv_cdf(0.5 + level / 2)
    centre = (share + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(share * (1 - share) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def _learnable_row(r: dict, runs: dict, s: dict) -> dict:
    G = int(runs.get("num_generations", 8))
    groups = runs.get("prompts_per_step")
    subset = _read(r["subset"], _available(r["subset"], ["pass_rate", "n_samples", "n_correct"]))
    predicted = stats.expected_learnable_share(subset["pass_rate"].to_numpy(), G)
    posterior = (posterior_learnable(subset["n_correct"].to_numpy(), subset["n_samples"].to_numpy(), G)
                 if {"n_correct", "n_samples"} <= set(subset.columns) else np.nan)
    log = _read(r["log"])
    learn = stats.learnable_from_log(log) if "frac_reward_zero_std" in log else pd.DataFrame(columns=["learnable"])
    n = window_steps(len(learn), s["learnable_window"])
    first = float(learn["learnable"].iloc[:n].mean()) if n else np.nan
    lo, hi = _wilson(first, n * groups if groups else 0, s["level"])
    return {**{k: r[k] for k in KEYS}, "subset_size": len(subset), "G": G, "logged_steps": len(learn),
            "window_steps": n, "window_groups": n * groups if groups else np.nan,
            "predicted_pct": 100 * predicted, "predicted_posterior_pct": 100 * posterior,
            "observed_first_pct": 100 * first, "observed_lo": 100 * lo, "observed_hi": 100 * hi,
            "observed_all_pct": 100 * float(learn["learnable"].mean()) if len(learn) else np.nan,
            "diff_pts": 100 * (first - predicted),
            "predicted_in_interval": bool(lo <= predicted <= hi) if np.isfinite(lo) else False}


def learnable_table(runs: dict, settings: dict) -> pd.DataFrame:
    """Per run: predicted share of groups with non-zero reward std vs the share observed over the first steps.

    ``observed_first_pct`` is the mean of 1 − frac_reward_zero_std over the first ``window_steps`` logged steps
    (``analysis.learnable_window``); ``observed_lo``/``observed_hi`` a Wilson interval over those steps' groups
    (prompts_per_step per step); ``observed_all_pct`` the mean over all steps (the paper's "learnable %").
    """
    s = _settings(settings)
    return _sort_arms(pd.DataFrame([_learnable_row(r, runs, s) for r in runs["runs"]]), ["seed"]).reset_index(drop=True)


# ---------------------------------------------------------------------------------------------------------------
# Difficulty tiers


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
        raise ValueError(f"stratify_by: the test set has no column {how!r} (columns: {', '.join(test.columns)})")
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


def _tier_records(runs: dict, s: dict) -> list[dict]:
    """Per run, evaluation set and tier: the base and final per-item accuracy."""
    base = _base_items(runs)
    out = []
    cache: dict[str, tuple] = {}
    for rec in _records(runs):
        r, evalset = rec["run"], rec["evalset"]
        if evalset not in cache:
            test = _read(runs["tests"][evalset])
            b = _eval_items(base[(r["model"], evalset)])
            cache[evalset] = tiers(test, b[b["step"] == 0], stratify_setting(evalset, s["stratify_by"]))
        tier, order, source = cache[evalset]
        final = rec["steps"][rec["steps"].columns.max()]
        t = tier.reindex(rec["base"].index)
        for i, name in enumerate(order):
            mask = (t == name).to_numpy()
            if mask.any():
                out.append({"run": r, "evalset": evalset, "stratify_by": source, "tier": name, "tier_order": i,
                            "base": rec["base"][mask], "final": final[mask]})
    return out


def difficulty_table(runs: dict, settings: dict, over_seeds: bool = False) -> pd.DataFrame:
    """Accuracy of the base model and of each arm's final checkpoint per difficulty tier of the test items.

    Per seed (default) or per arm over seeds (``over_seeds``), with bootstrap intervals.
    """
    s = _settings(settings)
    recs = _tier_records(runs, s)
    groups: dict[tuple, list[dict]] = {}
    for rec in recs:
        keys = KEYS if not over_seeds else ARM
        groups.setdefault((*[rec["run"][k] for k in keys], rec["evalset"], rec["tier"]), []).append(rec)
    rows = []
    for key, rs in groups.items():
        base = rs[0]["base"]
        c = compare(base.to_numpy(), np.stack([x["final"].loc[base.index].to_numpy() for x in rs]), s)
        keys = KEYS if not over_seeds else ARM
        rows.append({**dict(zip(keys + ["evalset", "tier"], key)), "stratify_by": rs[0]["stratify_by"],
                     "tier_order": rs[0]["tier_order"], **c})
    cols = ["tier_order"] + (["seed"] if not over_seeds else [])
    return _sort_arms(pd.DataFrame(rows), cols).reset_index(drop=True)


# ---------------------------------------------------------------------------------------------------------------
# Out of distribution


def pass_at_k_items(items: pd.DataFrame, k: int) -> np.ndarray:
    """Per-item unbiased pass@k from the ``n_samples``/``n_correct`` columns of an evaluation file."""
    return np.array([stats.pass_at_k(int(n), int(c), k) for n, c in zip(items["n_samples"], items["n_correct"])])


def ood_table(runs: dict, settings: dict, over_seeds: bool = False) -> pd.DataFrame:
    """Base vs final-checkpoint pass@k on every evaluation set other than the training set (``ood``).

    k runs over 1 and the number of samples per item (the smallest over base and trained evaluations).
    Empty (with its columns) when no dataset lists ``ood`` sets.
    """
    s = _settings(settings)
    base = _base_items(runs)
    groups: dict[tuple, list] = {}
    for r in runs["runs"]:
        for evalset, path in r["evals"].items():
            if evalset == r["dataset"]:
                continue
            b = _eval_items(base[(r["model"], evalset)])
            b = b[b["step"] == 0].set_index("id").sort_index()
            t = _eval_items(path)
            final_step = int(t["step"].max())
            t = t[t["step"] == final_step].set_index("id").reindex(b.index)
            if t["n_samples"].isna().any():
                raise ValueError(f"{path}: base test items missing at step {final_step}")
            keys = KEYS if not over_seeds else ARM
            groups.setdefault((*[r[k] for k in keys], evalset), []).append((b, t, final_step))
    rows = []
    for key, rs in groups.items():
        b = rs[0][0]
        n = int(min(b["n_samples"].min(), *(t["n_samples"].min() for _, t, _ in rs)))
        for k in sorted({1, n}):
            c = compare(pass_at_k_items(b, k), np.stack([pass_at_k_items(t, k) for _, t, _ in rs]), s)
            keys = KEYS if not over_seeds else ARM
            rows.append({**dict(zip(keys + ["evalset"], key)), "k": k, "n_samples": n,
                         "final_step": rs[0][2], **c})
    cols = KEYS + ["evalset", "k", "n_samples", "final_step", "n_seeds", "n_items", "base_acc", "final_acc",
                   "gain_pts", "gain_lo", "gain_hi"]
    if not rows:
        return pd.DataFrame(columns=[c for c in cols if c != "seed" or not over_seeds])
    return _sort_arms(pd.DataFrame(rows), ["k"] + (["seed"] if not over_seeds else [])).reset_index(drop=True)


# ---------------------------------------------------------------------------------------------------------------
# Learning curves


def curves(runs: dict, settings: dict | None = None) -> pd.DataFrame:
    """Accuracy per checkpoint for every arm and evaluation set (mean over seeds) with its interval; the base
    model is step 0 (items resampled)."""
    s = _settings(settings)
    groups: dict[tuple, list[dict]] = {}
    for rec in _records(runs):
        groups.setdefault((*[rec["run"][k] for k in ARM], rec["evalset"]), []).append(rec)
    rows = []
    for key, recs in groups.items():
        ids = recs[0]["base"].index
        base = recs[0]["base"].to_numpy()
        lo, hi = _interval(base[None], s)
        rows.append({**dict(zip(ARM + ["evalset"], key)), "step": 0, "n_seeds": len(recs),
                     "accuracy": float(base.mean()), "lo": lo, "hi": hi})
        steps = sorted(set.intersection(*[set(r["steps"].columns) for r in recs]))
        for step in steps:
            mat = np.stack([r["steps"][step].loc[ids].to_numpy() for r in recs])
            lo, hi = _interval(mat, s)
            rows.append({**dict(zip(ARM + ["evalset"], key)), "step": int(step), "n_seeds": len(recs),
                         "accuracy": float(mat.mean()), "lo": lo, "hi": hi})
    return _sort_arms(pd.DataFrame(rows), ["step"]).reset_index(drop=True)


# ---------------------------------------------------------------------------------------------------------------
# Writing tables


def _f(x: float, fmt: str) -> str:
    return "–" if x is None or (isinstance(x, float) and not np.isfinite(x)) else format(x, fmt)


def _pct(x: float) -> str:
    return _f(100 * x if x is not None else x, ".1f")


def _mean_sd(mean: float, sd: float, n: int, fmt: str = "+.1f", scale: float = 1.0) -> str:
    out = _f(scale * mean, fmt)
    return out + (f" ± {_f(scale * sd, '.1f')}" if n > 1 and np.isfinite(sd) else "")


def _interval_text(lo: float, hi: float, fmt: str = "+.1f", scale: float = 1.0) -> str:
    return f"[{_f(scale * lo, fmt)}, {_f(scale * hi, fmt)}]"


def _markdown_table(df: pd.DataFrame) -> list[str]:
    def cell(v) -> str:
        return str(v).replace("|", "\\|")

    lines = ["| " + " | ".join(map(cell, df.columns)) + " |", "|" + "---|" * len(df.columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return lines


def _sections(df: pd.DataFrame, by: Sequence[str]):
    if df.empty:
        return []
    return list(df.groupby(list(by), sort=False))


def _write_outputs(outs: Sequence[str], per_seed: pd.DataFrame, title: str, note: str,
                   sections: list[tuple[str, pd.DataFrame, list[str]]]) -> None:
    """CSV (``per_seed``, full precision), Markdown and HTML (the display ``sections``: heading, frame, notes)."""
    csv_out, md_out, html_out = (list(outs) + [None, None])[:3]
    if csv_out:
        with atomic_path(csv_out) as tmp:
            per_seed.to_csv(tmp, index=False)
    lines = [f"# {title}", "", note, ""]
    parts = [f"<h1>{html.escape(title)}</h1>", f"<p>{html.escape(note)}</p>"]
    if not sections:
        lines += ["(nothing to show)", ""]
        parts.append("<p>(nothing to show)</p>")
    for heading, frame, notes in sections:
        lines += [f"## {heading}", "", *_markdown_table(frame), ""] + [f"{n}  " for n in notes] + ([""] if notes else [])
        parts += [f"<h2>{html.escape(heading)}</h2>", frame.to_html(index=False, escape=True, border=0)]
        parts += [f"<p>{html.escape(n)}</p>" for n in notes]
    if md_out:
        write_text("\n".join(lines).rstrip() + "\n", md_out)
    if html_out:
        style = ("body{font-family:sans-serif;margin:1.5em}table{border-collapse:collapse;margin-bottom:1em}"
                 "th,td{padding:3px 9px;border-bottom:1px solid #ddd;text-align:right}th{background:#f4f4f4}")
        write_text(f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
                   f"<style>{style}</style></head><body>{''.join(parts)}</body></html>\n", html_out)


def _heading(key: tuple) -> str:
    model, dataset, evalset = key
    where = "in distribution" if evalset == dataset else "out of distribution"
    return f"{model} · trained on {dataset} · tested on {evalset} ({where})"


def write_summary(runs: dict, outs: list[str], settings: dict) -> None:
    """``outs``: summary CSV (per seed), Markdown, and optionally the over-seeds CSV and an HTML page."""
    s = _settings(settings)
    table = summary_table(runs, s)
    over = gains_over_seeds(runs, s)
    csv_out, md_out, *rest = outs
    if rest:
        with atomic_path(rest[0]) as tmp:
            over.to_csv(tmp, index=False)
    learn = table.groupby(ARM, sort=False)[["learnable_pct", "predicted_learnable_pct"]].mean()
    sections = []
    for key, g in _sections(over, PANEL):
        disp = pd.DataFrame({
            "policy": g["policy"], "budget": g["budget"], "seeds": g["n_seeds"],
            "base %": g["base_acc"].map(_pct),
            "final %": [_mean_sd(a, sd, n, ".1f", 100) for a, sd, n in zip(g["final_acc"], g["final_sd"], g["n_seeds"])],
            "best %": g["best_acc"].map(_pct),
            "gain (pts)": [_mean_sd(a, sd, n) for a, sd, n in zip(g["gain_pts"], g["gain_sd"], g["n_seeds"])],
            f"{s['level']:.0%} interval": [_interval_text(lo, hi) for lo, hi in zip(g["gain_lo"], g["gain_hi"])],
            "rel. gain": [_f(100 * x, "+.1f") + "%" for x in g["rel_gain"]],
            "learnable %": [_f(learn.loc[tuple(r[k] for k in ARM), "learnable_pct"], ".1f") for _, r in g.iterrows()],
            "predicted %": [_f(learn.loc[tuple(r[k] for k in ARM), "predicted_learnable_pct"], ".1f")
                            for _, r in g.iterrows()],
        })
        notes = []
        if len(g) > 1:
            top = g.loc[g["gain_pts"].idxmax()]
            bottom = g.loc[g["gain_pts"].idxmin()]
            notes.append(f"Largest gain: {_label(top)}, {top['gain_pts']:+.1f} pts "
                         f"({s['level']:.0%} interval {_interval_text(top['gain_lo'], top['gain_hi'])}); "
                         f"smallest: {_label(bottom)}, {bottom['gain_pts']:+.1f} pts "
                         f"{_interval_text(bottom['gain_lo'], bottom['gain_hi'])}.")
        sections.append((_heading(key), disp, notes))
    note = (f"Accuracy in %. Gain = final checkpoint − base model, in points, with a {s['level']:.0%} paired "
            "bootstrap interval over test items (with several seeds: over seeds and items; ± = std over seeds). "
            "Best = the best checkpoint's accuracy on this test set (chosen on the test set itself, so optimistic). "
            "Rel. gain = gain / (100 − base): the share of the base model's headroom closed. Learnable = share of "
            "GRPO groups with non-zero reward std over all training steps; predicted = 1 − pᴳ − (1 − p)ᴳ from the "
            "subset's base pass rates. Per-seed rows: summary.csv.")
    with atomic_path(csv_out) as tmp:
        table.to_csv(tmp, index=False)
    _write_outputs([None, md_out, rest[1] if len(rest) > 1 else None], table,
                   "grpo-budget summary: gains", note, sections)


def write_learnable(runs: dict, outs: list[str], settings: dict) -> None:
    s = _settings(settings)
    table = learnable_table(runs, s)
    w = s["learnable_window"]
    window = f"the first {w:.0%} of logged steps" if isinstance(w, float) else f"the first {w} logged steps"
    sections = []
    for key, g in _sections(table, ["model", "dataset"]):
        g = g.groupby(["policy", "budget"], sort=False).agg(
            seeds=("seed", "size"), steps=("window_steps", "first"), predicted=("predicted_pct", "mean"),
            posterior=("predicted_posterior_pct", "mean"), observed=("observed_first_pct", "mean"),
            lo=("observed_lo", "mean"), hi=("observed_hi", "mean"), overall=("observed_all_pct", "mean"),
            inside=("predicted_in_interval", "mean")).reset_index()
        disp = pd.DataFrame({
            "policy": g["policy"], "budget": g["budget"], "seeds": g["seeds"], "window steps": g["steps"],
            "predicted %": g["predicted"].map(lambda x: _f(x, ".1f")),
            "observed %": g["observed"].map(lambda x: _f(x, ".1f")),
            f"{s['level']:.0%} interval": [_interval_text(lo, hi, ".1f") for lo, hi in zip(g["lo"], g["hi"])],
            "observed − predicted": (g["observed"] - g["predicted"]).map(lambda x: _f(x, "+.1f")),
            "prediction inside": [("yes" if x == 1 else "no" if x == 0 else f"{x:.0%} of seeds") for x in g["inside"]],
            "posterior pred. %": g["posterior"].map(lambda x: _f(x, ".1f")),
            "observed, all steps %": g["overall"].map(lambda x: _f(x, ".1f")),
        })
        sections.append((f"{key[0]} · {key[1]}", disp, []))
    note = (f"Share of GRPO groups (one prompt, G completions) whose rewards are not all equal. Predicted: mean over "
            "the subset of 1 − pᴳ − (1 − p)ᴳ with p the item's base pass rate. Observed: mean of "
            f"1 − frac_reward_zero_std over {window} (the policy is still close to the base model there), with a "
            "Wilson interval over those steps' groups. Posterior prediction: the same with each p drawn from its "
            "Beta(c + ½, K − c + ½) posterior, which allows 0/K and K/K items their occasional mixed group. "
            "Observed, all steps: the paper's learnable %. Per-seed rows: the CSV.")
    _write_outputs(outs, table, "Learnable opportunities: predicted vs observed", note, sections)


def write_difficulty(runs: dict, outs: list[str], settings: dict) -> None:
    s = _settings(settings)
    per_seed = difficulty_table(runs, s)
    over = difficulty_table(runs, s, over_seeds=True)
    sections = []
    for key, g in _sections(over, PANEL):
        wide = None
        for (policy, budget), a in g.groupby(["policy", "budget"], sort=False):
            col = pd.DataFrame({
                "tier": a["tier"].to_numpy(), "items": a["n_items"].to_numpy(),
                "base %": a["base_acc"].map(_pct).to_numpy(),
                f"{policy} @ {budget}": [f"{_pct(f)} ({_f(d, '+.1f')})" for f, d in zip(a["final_acc"], a["gain_pts"])]})
            wide = col if wide is None else wide.merge(col, on=["tier", "items", "base %"], how="outer", sort=False)
        notes = [f"Tiers: {g['stratify_by'].iloc[0]}. Cells: final accuracy % (gain in points over the base model "
                 "on the same items); intervals in the CSV."]
        sections.append((_heading(key), wide, notes))
    note = ("Accuracy by difficulty tier of the test items, before (base model) and after training (final "
            "checkpoint). With tiers from the base model's own per-item accuracy, the base column is that accuracy "
            "by construction and part of any change is regression to the mean; metadata tiers (level, n_objects, "
            "n_ops, n_steps) are free of this.")
    _write_outputs(outs, per_seed, "Accuracy by difficulty tier", note, sections)


def write_ood(runs: dict, outs: list[str], settings: dict) -> None:
    s = _settings(settings)
    per_seed = ood_table(runs, s)
    over = ood_table(runs, s, over_seeds=True)
    sections = []
    for key, g in _sections(over, PANEL):
        disp = pd.DataFrame({
            "policy": g["policy"], "budget": g["budget"], "seeds": g["n_seeds"], "k": g["k"],
            "base pass@k %": g["base_acc"].map(_pct),
            "trained pass@k %": [_mean_sd(a, sd, n, ".1f", 100) for a, sd, n in zip(g["final_acc"], g["final_sd"], g["n_seeds"])],
            "gain (pts)": [_mean_sd(a, sd, n) for a, sd, n in zip(g["gain_pts"], g["gain_sd"], g["n_seeds"])],
            f"{s['level']:.0%} interval": [_interval_text(lo, hi) for lo, hi in zip(g["gain_lo"], g["gain_hi"])],
        })
        sections.append((_heading(key), disp, []))
    note = ("Base model vs the final checkpoint of each arm on evaluation sets other than the training set "
            "(the dataset's `ood` list). pass@k is the unbiased estimator 1 − C(n − c, k)/C(n, k) per item (n samples, "
            f"c correct), averaged over items; pass@1 = accuracy. Intervals: {s['level']:.0%} paired bootstrap over "
            "items (and seeds).")
    if over.empty:
        note += " No dataset of this configuration lists out-of-distribution sets."
    _write_outputs(outs, per_seed, "Out-of-distribution accuracy", note, sections)


# ---------------------------------------------------------------------------------------------------------------
# Figures


def _save_figure(fig, outs: Sequence[str]) -> None:
    import matplotlib.pyplot as plt

    for path in outs:
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format=Path(path).suffix.lstrip(".") or "png", dpi=120, bbox_inches="tight")
    plt.close(fig)


def _panels(n: int):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = max(n, 1)
    cols = min(n, 3)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 3.8 * rows), squeeze=False)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat)


def _style(policy: str, budget: str, budgets: Sequence[str]) -> dict:
    i = list(budgets).index(budget) if budget in budgets else 0
    return {"color": POLICY_COLORS.get(policy, "C7"), "ls": BUDGET_STYLES[i % len(BUDGET_STYLES)]}


def _empty(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes)
    ax.set_axis_off()


def figure_accuracy(runs: dict, outs: Sequence[str], settings: dict) -> None:
    """Accuracy vs checkpoint per arm (mean over seeds) with its bootstrap band; one panel per test set."""
    s = _settings(settings)
    df = curves(runs, s)
    groups = _sections(df, PANEL)
    fig, axes = _panels(len(groups))
    for ax, (key, g) in zip(axes, groups):
        budgets = list(dict.fromkeys(g["budget"]))
        base = g[g["step"] == 0].iloc[0]
        ax.errorbar([0], [100 * base["accuracy"]], yerr=[[100 * (base["accuracy"] - base["lo"])],
                    [100 * (base["hi"] - base["accuracy"])]], color="black", marker="s", capsize=3, zorder=5,
                    label="base model")
        for (policy, budget), a in g.groupby(["policy", "budget"], sort=False):
            st = _style(policy, budget, budgets)
            seeds = int(a["n_seeds"].max())
            ax.plot(a["step"], 100 * a["accuracy"], marker="o", ms=4, **st,
                    label=f"{policy} @ {budget}" + (f" ({seeds} seeds)" if seeds > 1 else ""))
            ax.fill_between(a["step"], 100 * a["lo"], 100 * a["hi"], color=st["color"], alpha=0.15, lw=0)
        ax.set(title=_heading(key).split(" (")[0].replace("trained on ", "").replace(" · tested on ", " → "),
               xlabel="training step (0 = base model)", ylabel="accuracy %")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, title=f"bands: {s['level']:.0%} bootstrap interval", title_fontsize=7)
    if not groups:
        _empty(axes[0], "no evaluations")
    _save_figure(fig, outs)


def figure_learnable(runs: dict, outs: Sequence[str], settings: dict) -> None:
    """Share of groups with non-zero reward std per step (observed, mean over seeds) and the prediction."""
    s = _settings(settings)
    G = int(runs.get("num_generations", 8))
    keyed: dict[tuple, list[dict]] = {}
    for r in runs["runs"]:
        keyed.setdefault((r["model"], r["dataset"]), []).append(r)
    fig, axes = _panels(len(keyed))
    for ax, ((model, dataset), rs) in zip(axes, sorted(keyed.items())):
        budgets = list(dict.fromkeys(r["budget"] for r in rs))
        arms: dict[tuple, list[dict]] = {}
        for r in rs:
            arms.setdefault((r["policy"], r["budget"]), []).append(r)
        window = 0
        for (policy, budget), group in sorted(arms.items(), key=lambda kv: (_policy_rank(kv[0][0]), kv[0][1])):
            st = _style(policy, budget, budgets)
            learn = pd.concat([stats.learnable_from_log(_read(r["log"])).assign(seed=r["seed"]) for r in group])
            per_step = learn.groupby("step")["learnable"].mean()
            window = max(window, window_steps(len(per_step), s["learnable_window"]))
            ax.plot(per_step.index, 100 * per_step, color=st["color"], alpha=0.3, lw=1)
            ax.plot(per_step.index, 100 * per_step.expanding().mean(), lw=2, **st,
                    label=f"{policy} @ {budget}" + (f" ({len(group)} seeds)" if len(group) > 1 else ""))
            p = np.mean([stats.expected_learnable_share(_read(r["subset"], ["pass_rate"])["pass_rate"].to_numpy(), G)
                         for r in group])
            ax.axhline(100 * p, color=st["color"], ls=(0, (4, 3)), lw=1)
        if window:
            ax.axvspan(0.5, window + 0.5, color="0.85", alpha=0.5, lw=0, zorder=0)
        ax.set(title=f"{model} · {dataset}", xlabel="training step", ylabel="groups with reward std > 0 (%)",
               ylim=(-3, 103))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, title="thin: per step, thick: cumulative mean, dashed: predicted,\n"
                  "grey: the first steps the learnable table compares", title_fontsize=7,
                  loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2)
    if not keyed:
        _empty(axes[0], "no runs")
    _save_figure(fig, outs)


def figure_pass_rates(runs: dict, outs: Sequence[str], settings: dict) -> None:
    """The pool's base pass-rate histogram, each policy's subset overlaid."""
    fig, axes = _panels(len(runs["scores"]))
    for ax, sc in zip(axes, runs["scores"]):
        pool = _read(sc["path"], _available(sc["path"], ["id", "pass_rate", "n_samples"]))
        K = int(pool["n_samples"].max()) if "n_samples" in pool else 8
        bins = np.linspace(-0.5 / K, 1 + 0.5 / K, K + 2) if pool["pass_rate"].nunique() <= K + 1 else 20
        ax.hist(pool["pass_rate"], bins=bins, color="0.8", label=f"pool ({len(pool)})")
        mine = [x for x in runs["runs"] if (x["model"], x["dataset"]) == (sc["model"], sc["dataset"])]
        budgets = list(dict.fromkeys(r["budget"] for r in mine))
        seen = set()
        for r in sorted(mine, key=lambda x: (_policy_rank(x["policy"]), x["budget"], x["seed"])):
            key = (r["policy"], r["budget"])
            if key in seen or r["policy"] == "full":
                continue
            seen.add(key)
            sub = _read(r["subset"], ["pass_rate"])
            st = _style(*key, budgets)
            ax.hist(sub["pass_rate"], bins=bins, histtype="step", lw=2, color=st["color"], ls=st["ls"],
                    label=f"{_label(r)} ({len(sub)})")
        inside = ((pool["pass_rate"] > 0) & (pool["pass_rate"] < 1)).mean()
        ax.set(title=f"{sc['model']} · {sc['dataset']}: {inside:.0%} strictly between 0 and 1",
               xlabel="base-model pass rate", ylabel="items")
        ax.legend(fontsize=8)
    if not runs["scores"]:
        _empty(axes[0], "no scores")
    _save_figure(fig, outs)


def figure_difficulty(runs: dict, outs: Sequence[str], settings: dict) -> None:
    """Accuracy per difficulty tier: base model and each arm's final checkpoint, with intervals."""
    s = _settings(settings)
    df = difficulty_table(runs, s, over_seeds=True)
    groups = _sections(df, PANEL)
    fig, axes = _panels(len(groups))
    for ax, (key, g) in zip(axes, groups):
        tiers_ = g.drop_duplicates("tier").sort_values("tier_order")
        x = {t: i for i, t in enumerate(tiers_["tier"])}
        arms = list(g.groupby(["policy", "budget"], sort=False))
        width = 0.8 / (len(arms) + 1)
        budgets = list(dict.fromkeys(g["budget"]))
        b = tiers_
        xs = np.array([x[t] for t in b["tier"]]) - 0.4 + width / 2
        ax.errorbar(xs, 100 * b["base_acc"], yerr=[100 * (b["base_acc"] - b["base_lo"]), 100 * (b["base_hi"] - b["base_acc"])],
                    fmt="s", color="black", capsize=2, label="base model")
        for i, ((policy, budget), a) in enumerate(arms, start=1):
            st = _style(policy, budget, budgets)
            xs = np.array([x[t] for t in a["tier"]]) - 0.4 + width * (i + 0.5)
            seeds = int(a["n_seeds"].max())
            ax.errorbar(xs, 100 * a["final_acc"], yerr=[100 * (a["final_acc"] - a["final_lo"]),
                        100 * (a["final_hi"] - a["final_acc"])], fmt="o", color=st["color"], capsize=2,
                        label=f"{policy} @ {budget}" + (f" ({seeds} seeds)" if seeds > 1 else ""))
        ax.set_xticks(range(len(x)), [f"{t}\n(n={n})" for t, n in zip(tiers_["tier"], tiers_["n_items"])],
                      fontsize=7)
        ax.set(title=_heading(key).split(" (")[0].replace("trained on ", "").replace(" · tested on ", " → "),
               xlabel=f"difficulty tier ({g['stratify_by'].iloc[0]})", ylabel="accuracy %", ylim=(-3, 103))
        ax.grid(alpha=0.3, axis="y")
        ax.legend(fontsize=7, title=f"final checkpoint; bars: {s['level']:.0%} interval", title_fontsize=7,
                  loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=3)
    if not groups:
        _empty(axes[0], "no evaluations")
    _save_figure(fig, outs)


# ---------------------------------------------------------------------------------------------------------------
# Dispatch

OUTPUTS: dict[str, Callable] = {
    "summary": write_summary,
    "table-learnable": write_learnable,
    "table-difficulty": write_difficulty,
    "table-ood": write_ood,
    "figure-accuracy": figure_accuracy,
    "figure-learnable": figure_learnable,
    "figure-pass-rates": figure_pass_rates,
    "figure-difficulty": figure_difficulty,
}
FIGURES = {k: v for k, v in OUTPUTS.items() if k.startswith("figure-")}


def run(what: str, runs: dict | str, outs: list[str], settings: dict) -> None:
    """Write one aggregate output kind (:data:`OUTPUTS`) to ``outs`` (a figure: each path in its own format)."""
    if isinstance(runs, str):
        runs = read_json(runs)
    if what not in OUTPUTS:
        raise ValueError(f"unknown aggregate output {what!r}; allowed: {', '.join(OUTPUTS)}")
    OUTPUTS[what](runs, list(outs), settings)

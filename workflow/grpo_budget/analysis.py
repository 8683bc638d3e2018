"""Aggregate stage: tables and figures from the cached outputs of every run.

The workflow passes a JSON listing of runs and their files (see ``common.smk``); each output kind is its own
function so that each table or figure is its own Snakemake target.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from . import stats
from .io import atomic_path, read_json, write_text

KEYS = ["model", "dataset", "policy", "budget", "seed"]


def _per_item(eval_path: str, step: int | None = None) -> pd.Series:
    """Accuracy per test item at ``step`` (the last step when None), indexed by id."""
    ev = pd.read_parquet(eval_path, columns=["id", "step", "accuracy"])
    step = ev["step"].max() if step is None else step
    return ev[ev["step"] == step].set_index("id")["accuracy"]


def curves(runs: dict) -> pd.DataFrame:
    """Accuracy per checkpoint for every run and evaluation set, the base model as step 0."""
    rows = []
    base = {(b["model"], b["evalset"]): b["eval"] for b in runs["base"]}
    for r in runs["runs"]:
        for evalset, path in r["evals"].items():
            base_acc = pd.read_parquet(base[(r["model"], evalset)], columns=["accuracy"])["accuracy"].mean()
            rows.append({**{k: r[k] for k in KEYS}, "evalset": evalset, "step": 0, "accuracy": base_acc})
            ev = pd.read_parquet(path, columns=["step", "accuracy"])
            for step, acc in ev.groupby("step")["accuracy"].mean().items():
                rows.append({**{k: r[k] for k in KEYS}, "evalset": evalset, "step": int(step), "accuracy": acc})
    return pd.DataFrame(rows)


def summary_table(runs: dict, settings: dict) -> pd.DataFrame:
    """One row per run and evaluation set: base, final and best accuracy, paired-bootstrap gain, learnability."""
    n_boot, level, seed = settings.get("n_boot", 2000), settings.get("level", 0.95), settings.get("seed", 0)
    G = int(runs.get("num_generations", 8))
    base = {(b["model"], b["evalset"]): b["eval"] for b in runs["base"]}
    rows = []
    for r in runs["runs"]:
        subset = pd.read_parquet(r["subset"], columns=["id", "pass_rate"])
        log = pd.read_parquet(r["log"])
        learn = stats.learnable_from_log(log) if "frac_reward_zero_std" in log else pd.DataFrame()
        for evalset, path in r["evals"].items():
            ev = pd.read_parquet(path, columns=["id", "step", "accuracy"])
            by_step = ev.groupby("step")["accuracy"].mean()
            final_step, best_step = int(by_step.index.max()), int(by_step.idxmax())
            b = _per_item(base[(r["model"], evalset)], 0)
            t = _per_item(path, final_step).reindex(b.index)
            g = stats.paired_bootstrap_gain(b.to_numpy(), t.to_numpy(), n_boot=n_boot, seed=seed, level=level)
            rows.append(
                {
                    **{k: r[k] for k in KEYS},
                    "evalset": evalset,
                    "n_test": len(b),
                    "subset_size": len(subset),
                    "subset_mean_pass_rate": subset["pass_rate"].mean(),
                    "base_acc": g["base_acc"],
                    "final_step": final_step,
                    "final_acc": g["trained_acc"],
                    "best_step": best_step,
                    "best_acc": float(by_step.max()),
                    "gain_pts": g["gain"],
                    "gain_lo": g["gain_lo"],
                    "gain_hi": g["gain_hi"],
                    "rel_gain": g["rel_gain"],
                    "learnable_pct": 100 * learn["learnable"].mean() if len(learn) else np.nan,
                    "predicted_learnable_pct": 100 * stats.expected_learnable_share(subset["pass_rate"].to_numpy(), G),
                }
            )
    return pd.DataFrame(rows)


def summary_markdown(table: pd.DataFrame, level: float = 0.95) -> str:
    """Readable summary: per model, dataset and test set, one line per policy and budget (mean over seeds)."""
    lines = ["# grpo-budget summary", "",
             f"Accuracy in %. Gain = final checkpoint − base model, in points, with a {level:.0%} paired bootstrap "
             "interval over test items (averaged over seeds when there are several; ± = std over seeds). "
             "Learnable = share of GRPO groups with non-zero reward std, observed over training; predicted = "
             "1 − pᴳ − (1 − p)ᴳ from the subset's base pass rates.", ""]
    for (model, dataset, evalset), grp in table.groupby(["model", "dataset", "evalset"], sort=True):
        lines += [f"## {model} · trained on {dataset} · tested on {evalset}", "",
                  "| policy | budget | seeds | base | final | gain (pts) | interval | best (step) | rel. gain | "
                  "learnable % | predicted % |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for (policy, budget), g in grp.groupby(["policy", "budget"], sort=False):
            mean, sd, n = stats.mean_spread(g["gain_pts"])
            spread = f" ± {sd:.1f}" if n > 1 else ""
            lines.append(
                f"| {policy} | {budget} | {n} | {100 * g['base_acc'].mean():.1f} | {100 * g['final_acc'].mean():.1f} "
                f"| {mean:+.1f}{spread} | [{g['gain_lo'].mean():+.1f}, {g['gain_hi'].mean():+.1f}] "
                f"| {100 * g['best_acc'].mean():.1f} ({int(g['best_step'].median())}) | {g['rel_gain'].mean():+.3f} "
                f"| {g['learnable_pct'].mean():.1f} | {g['predicted_learnable_pct'].mean():.1f} |"
            )
        lines.append("")
    return "\n".join(lines)


def _save_figure(fig, path: str) -> None:
    import matplotlib.pyplot as plt

    with atomic_path(path) as tmp:
        fig.savefig(tmp, format=Path(path).suffix.lstrip(".") or "png", dpi=120, bbox_inches="tight")
    plt.close(fig)


def _panels(n: int):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = min(n, 3)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 3.6 * rows), squeeze=False)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat)


def figure_accuracy(runs: dict, out: str, settings: dict) -> None:
    """Accuracy vs checkpoint, one line per policy × budget (mean over seeds), one panel per test set."""
    df = curves(runs)
    groups = list(df.groupby(["model", "dataset", "evalset"]))
    fig, axes = _panels(len(groups))
    for ax, ((model, dataset, evalset), g) in zip(axes, groups):
        for (policy, budget), gg in g.groupby(["policy", "budget"]):
            m = gg.groupby("step")["accuracy"].agg(["mean", "std"]).reset_index()
            ax.plot(m["step"], 100 * m["mean"], marker="o", label=f"{policy} @ {budget}")
            if gg["seed"].nunique() > 1:
                ax.fill_between(m["step"], 100 * (m["mean"] - m["std"]), 100 * (m["mean"] + m["std"]), alpha=0.2)
        ax.set(title=f"{model} · {dataset} → {evalset}", xlabel="training step (0 = base model)", ylabel="accuracy %")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    _save_figure(fig, out)


def figure_learnable(runs: dict, out: str, settings: dict) -> None:
    """Share of groups with non-zero reward std per step (observed) and the prediction from base pass rates."""
    G = int(runs.get("num_generations", 8))
    keyed = {}
    for r in runs["runs"]:
        keyed.setdefault((r["model"], r["dataset"]), []).append(r)
    fig, axes = _panels(len(keyed))
    for ax, ((model, dataset), rs) in zip(axes, sorted(keyed.items())):
        for i, r in enumerate(rs):
            color = f"C{i % 10}"
            learn = stats.learnable_from_log(pd.read_parquet(r["log"]))
            label = f"{r['policy']} @ {r['budget']} s{r['seed']}"
            ax.plot(learn["step"], 100 * learn["learnable"], color=color, alpha=0.35, lw=1)
            ax.plot(learn["step"], 100 * learn["learnable_cum"], color=color, lw=2, label=label)
            p = pd.read_parquet(r["subset"], columns=["pass_rate"])["pass_rate"].to_numpy()
            ax.axhline(100 * stats.expected_learnable_share(p, G), color=color, ls="--", lw=1)
        ax.set(title=f"{model} · {dataset}", xlabel="training step", ylabel="groups with reward std > 0 (%)",
               ylim=(-3, 103))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, title="thin: per step, thick: cumulative,\ndashed: predicted", title_fontsize=7)
    _save_figure(fig, out)


def figure_pass_rates(runs: dict, out: str, settings: dict) -> None:
    """The pool's base pass-rate histogram, each policy's subset overlaid."""
    fig, axes = _panels(len(runs["scores"]))
    for ax, s in zip(axes, runs["scores"]):
        pool = pd.read_parquet(s["path"], columns=["id", "pass_rate"])
        bins = np.linspace(-0.5 / 8, 1 + 0.5 / 8, 10) if pool["pass_rate"].nunique() <= 9 else 20
        ax.hist(pool["pass_rate"], bins=bins, color="0.8", label=f"pool ({len(pool)})")
        seen = set()
        for i, r in enumerate(x for x in runs["runs"] if (x["model"], x["dataset"]) == (s["model"], s["dataset"])):
            key = (r["policy"], r["budget"])
            if key in seen or r["policy"] == "full":
                continue
            seen.add(key)
            sub = pd.read_parquet(r["subset"], columns=["pass_rate"])
            ax.hist(sub["pass_rate"], bins=bins, histtype="step", lw=2, label=f"{r['policy']} @ {r['budget']} ({len(sub)})")
        inside = ((pool["pass_rate"] > 0) & (pool["pass_rate"] < 1)).mean()
        ax.set(title=f"{s['model']} · {s['dataset']}: {inside:.0%} strictly between 0 and 1",
               xlabel="base-model pass rate", ylabel="items")
        ax.legend(fontsize=8)
    _save_figure(fig, out)


def write_summary(runs: dict, outs: list[str], settings: dict) -> None:
    table = summary_table(runs, settings)
    csv_out, md_out = outs
    with atomic_path(csv_out) as tmp:
        table.to_csv(tmp, index=False)
    write_text(summary_markdown(table, settings.get("level", 0.95)), md_out)


FIGURES: dict[str, Callable] = {
    "figure-accuracy": figure_accuracy,
    "figure-learnable": figure_learnable,
    "figure-pass-rates": figure_pass_rates,
}


def run(what: str, runs: dict | str, outs: list[str], settings: dict) -> None:
    """Dispatch one aggregate output kind."""
    if isinstance(runs, str):
        runs = read_json(runs)
    if what == "summary":
        write_summary(runs, outs, settings)
    elif what in FIGURES:
        for out in outs:
            FIGURES[what](runs, out, settings)
    else:
        raise ValueError(f"unknown aggregate output {what!r}; allowed: summary, {', '.join(FIGURES)}")

"""The aggregate figures, each as PNG and PDF."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from grpo_budget.aggregate.gains import curves, gains_over_seeds
from grpo_budget.aggregate.learnable import learnable_row
from grpo_budget.aggregate.outputs import output
from grpo_budget.aggregate.read import (
    PANEL,
    available_columns,
    arm_label,
    policy_color,
    policy_rank,
    read_table,
    keys_in,
    panel_order,
)
from grpo_budget.aggregate.regime import policies_in, regime_table
from grpo_budget.aggregate.render import section_heading, groups_of
from grpo_budget.aggregate.tiers import difficulty_table
from grpo_budget.aggregate.verdicts import verdict_table
from grpo_budget.experiment.plan import Listing, budget_sort_key
from grpo_budget.config.settings import Analysis
from grpo_budget.experiment.sweep import format_value, label
from grpo_budget.io import atomic_path
from grpo_budget.learnability import learnable_from_log, window_steps

BUDGET_STYLES = ["-", "--", ":", "-."]



def save_figure(fig, outs: Sequence[str]) -> None:
    import matplotlib.pyplot as plt

    for path in outs:
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format=Path(path).suffix.lstrip(".") or "png", dpi=120, bbox_inches="tight")
    plt.close(fig)


def panel_grid(n: int):
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


def line_style(policy: str, budget: str, budgets: Sequence[str]) -> dict:
    i = list(budgets).index(budget) if budget in budgets else 0
    return {"color": policy_color(policy), "ls": BUDGET_STYLES[i % len(BUDGET_STYLES)]}


def empty_panel(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes)
    ax.set_axis_off()


@output("accuracy_vs_checkpoint", "figure", reads={"evals"})
def figure_accuracy(runs: Listing, outs: Sequence[str], s: Analysis) -> None:
    """Accuracy vs checkpoint per arm (mean over seeds) with its bootstrap band; one panel per test set."""
    df = curves(runs, s)
    groups = panel_order(runs, groups_of(df, PANEL))
    fig, axes = panel_grid(len(groups))
    for ax, (key, g) in zip(axes, groups):
        arm = keys_in(g, ["policy", "budget", "variant"])
        budgets = list(dict.fromkeys(map(tuple, g[arm[1:]].to_numpy())))  # line styles: budget (and variant)
        base = g[g["step"] == 0].iloc[0]
        ax.errorbar([0], [100 * base["accuracy"]], yerr=[[100 * (base["accuracy"] - base["lo"])],
                    [100 * (base["hi"] - base["accuracy"])]], color="black", marker="s", capsize=3, zorder=5,
                    label="base model")
        for arm_key, a in g.groupby(arm, sort=False):
            st = line_style(arm_key[0], arm_key[1:], budgets)
            seeds = int(a["n_seeds"].max())
            ax.plot(a["step"], 100 * a["accuracy"], marker="o", ms=4, **st,
                    label=arm_label(*arm_key) + (f" ({seeds} seeds)" if seeds > 1 else ""))
            ax.fill_between(a["step"], 100 * a["lo"], 100 * a["hi"], color=st["color"], alpha=0.15, lw=0)
        ax.set(title=section_heading(key).split(" (")[0].replace("trained on ", "").replace(" · tested on ", " → "),
               xlabel="training step (0 = base model)", ylabel="accuracy %")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, title=f"bands: {s.level:.0%} bootstrap interval", title_fontsize=7)
    if not groups:
        empty_panel(axes[0], "no evaluations")
    save_figure(fig, outs)


@output("learnable_vs_step", "figure", reads={"logs", "subsets", "verify"})
def figure_learnable(runs: Listing, outs: Sequence[str], s: Analysis) -> None:
    """Share of groups with non-zero reward std per step (observed, mean over seeds) and the prediction."""
    keyed: dict[tuple, list[dict]] = {}
    for r in runs.runs:
        keyed.setdefault((r.model, r.dataset), []).append(r)
    fig, axes = panel_grid(len(keyed))
    for ax, ((model, dataset), rs) in zip(axes, panel_order(runs, keyed.items())):
        budgets = list(dict.fromkeys((r.budget, r.variant) for r in rs))
        arms: dict[tuple, list[dict]] = {}
        for r in rs:
            arms.setdefault((r.policy, r.budget, r.variant), []).append(r)
        window = 0
        by_arm = sorted(arms.items(), key=lambda kv: (policy_rank(kv[0][0]), budget_sort_key(kv[0][1])))
        for (policy, budget, variant), group in by_arm:
            st = line_style(policy, (budget, variant), budgets)
            learn = pd.concat([learnable_from_log(read_table(r.log)).assign(seed=r.seed) for r in group])
            per_step = learn.groupby("step")["learnable"].mean()
            window = max(window, window_steps(len(per_step), s.learnable_window))
            ax.plot(per_step.index, 100 * per_step, color=st["color"], alpha=0.3, lw=1)
            ax.plot(per_step.index, 100 * per_step.expanding().mean(), lw=2, **st,
                    label=arm_label(policy, budget, variant) + (f" ({len(group)} seeds)" if len(group) > 1 else ""))
            p = np.mean([learnable_row(r, runs, s)["predicted_pct"] for r in group])  # the table's lead prediction
            ax.axhline(p, color=st["color"], ls=(0, (4, 3)), lw=1)
        if window:
            ax.axvspan(0.5, window + 0.5, color="0.85", alpha=0.5, lw=0, zorder=0)
        ax.set(title=f"{model} · {dataset}", xlabel="training step", ylabel="groups with reward std > 0 (%)",
               ylim=(-3, 103))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, title="thin: per step, thick: cumulative mean, dashed: predicted,\n"
                  "grey: the first steps the learnable table compares", title_fontsize=7,
                  loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2)
    if not keyed:
        empty_panel(axes[0], "no runs")
    save_figure(fig, outs)


@output("pass_rate_histogram", "figure", reads={"subsets", "scores"})
def figure_pass_rates(runs: Listing, outs: Sequence[str], s: Analysis) -> None:
    """The pool's base pass-rate histogram, each policy's subset overlaid."""
    fig, axes = panel_grid(len(runs.scores))
    for ax, sc in zip(axes, panel_order(runs, runs.scores, key=lambda sc: (sc.model, sc.dataset))):
        pool = read_table(sc.path, available_columns(sc.path, ["id", "pass_rate", "n_samples"]))
        K = int(pool["n_samples"].max()) if "n_samples" in pool else 8
        bins = np.linspace(-0.5 / K, 1 + 0.5 / K, K + 2) if pool["pass_rate"].nunique() <= K + 1 else 20
        ax.hist(pool["pass_rate"], bins=bins, color="0.8", label=f"pool ({len(pool)})")
        mine = [x for x in runs.runs if (x.model, x.dataset) == (sc.model, sc.dataset)]
        budgets = list(dict.fromkeys(r.budget for r in mine))
        seen = set()
        for r in sorted(mine, key=lambda x: (policy_rank(x.policy), budget_sort_key(x.budget), x.seed)):
            key = (r.policy, r.budget)
            if key in seen or r.policy == "full":
                continue
            seen.add(key)
            sub = read_table(r.subset, ["pass_rate"])
            st = line_style(*key, budgets)
            ax.hist(sub["pass_rate"], bins=bins, histtype="step", lw=2, color=st["color"], ls=st["ls"],
                    label=f"{arm_label(r.policy, r.budget)} ({len(sub)})")
        inside = ((pool["pass_rate"] > 0) & (pool["pass_rate"] < 1)).mean()
        ax.set(title=f"{sc.model} · {sc.dataset}: {inside:.0%} strictly between 0 and 1",
               xlabel="base-model pass rate", ylabel="items")
        ax.legend(fontsize=8)
    if not runs.scores:
        empty_panel(axes[0], "no scores")
    save_figure(fig, outs)


@output("accuracy_by_difficulty", "figure", reads={"evals", "tests"})
def figure_difficulty(runs: Listing, outs: Sequence[str], s: Analysis) -> None:
    """Accuracy per difficulty tier: base model and each arm's final checkpoint, with intervals."""
    df = difficulty_table(runs, s, over_seeds=True)
    groups = panel_order(runs, groups_of(df, PANEL))
    fig, axes = panel_grid(len(groups))
    for ax, (key, g) in zip(axes, groups):
        tiers_ = g.drop_duplicates("tier").sort_values("tier_order")
        x = {t: i for i, t in enumerate(tiers_["tier"])}
        arm = keys_in(g, ["policy", "budget", "variant"])
        arms = list(g.groupby(arm, sort=False))
        width = 0.8 / (len(arms) + 1)
        budgets = list(dict.fromkeys(map(tuple, g[arm[1:]].to_numpy())))
        b = tiers_
        xs = np.array([x[t] for t in b["tier"]]) - 0.4 + width / 2
        ax.errorbar(xs, 100 * b["base_acc"], yerr=[100 * (b["base_acc"] - b["base_lo"]), 100 * (b["base_hi"] - b["base_acc"])],
                    fmt="s", color="black", capsize=2, label="base model")
        for i, (arm_key, a) in enumerate(arms, start=1):
            st = line_style(arm_key[0], arm_key[1:], budgets)
            xs = np.array([x[t] for t in a["tier"]]) - 0.4 + width * (i + 0.5)
            seeds = int(a["n_seeds"].max())
            ax.errorbar(xs, 100 * a["final_acc"], yerr=[100 * (a["final_acc"] - a["final_lo"]),
                        100 * (a["final_hi"] - a["final_acc"])], fmt="o", color=st["color"], capsize=2,
                        label=arm_label(*arm_key) + (f" ({seeds} seeds)" if seeds > 1 else ""))
        ax.set_xticks(range(len(x)), [f"{t}\n(n={n})" for t, n in zip(tiers_["tier"], tiers_["n_items"])],
                      fontsize=7)
        ax.set(title=section_heading(key).split(" (")[0].replace("trained on ", "").replace(" · tested on ", " → "),
               xlabel=f"difficulty tier ({g['stratify_by'].iloc[0]})", ylabel="accuracy %", ylim=(-3, 103))
        ax.grid(alpha=0.3, axis="y")
        ax.legend(fontsize=7, title=f"final checkpoint; bars: {s.level:.0%} interval", title_fontsize=7,
                  loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=3)
    if not groups:
        empty_panel(axes[0], "no evaluations")
    save_figure(fig, outs)


@output("arm_differences", "figure", reads={"evals"})
def figure_differences(runs: Listing, outs: Sequence[str], s: Analysis) -> None:
    """Pairwise differences A − B in final accuracy with their paired intervals; one panel per comparison."""
    table = verdict_table(runs, s)
    groups = panel_order(runs, groups_of(table, PANEL + keys_in(table, ["budget", "variant"])))
    fig, axes = panel_grid(len(groups))
    colors = {"A": "#d62728", "B": "#1f77b4"}
    for ax, (key, g) in zip(axes, groups):
        y = np.arange(len(g))[::-1]
        for yi, (_, r) in zip(y, g.iterrows()):
            side = "A" if r["verdict"].startswith(r["arm_a"] + " ") else "B" if r["verdict"].startswith(r["arm_b"] + " ") else None
            ax.errorbar([r["diff_pts"]], [yi], xerr=[[r["diff_pts"] - r["diff_lo"]], [r["diff_hi"] - r["diff_pts"]]],
                        fmt="o", color=colors.get(side, "0.5"), capsize=3)
        ax.axvline(0, color="black", lw=1)
        ax.set_yticks(y, [f"{a} − {b}" for a, b in zip(g["arm_a"], g["arm_b"])], fontsize=8)
        model, dataset, evalset, budget = key[:4]
        ax.set(title=f"{model} · {dataset} → {evalset} · budget {budget}" + (f" · {key[4]}" if len(key) > 4 else ""),
               xlabel="A − B, final accuracy (points)")
        ax.grid(alpha=0.3, axis="x")
    if not groups:
        empty_panel(axes[0], "fewer than two policies: nothing to compare")
    save_figure(fig, outs)


def _in_distribution(df: pd.DataFrame) -> pd.DataFrame:
    return df[~df["ood"].astype(bool)] if len(df) else df


def _gain_lines(ax, g: pd.DataFrame, x_of, xs: list[str], s: Analysis) -> None:
    """One line per policy of gain (points) with its interval against categorical positions ``xs``; ``x_of`` maps
    a row to its category. Policies are offset a little so that their intervals do not overlap."""
    policies = sorted(dict.fromkeys(g["policy"]), key=policy_rank)
    for i, policy in enumerate(policies):
        a = g[g["policy"] == policy]
        pos = {x: j for j, x in enumerate(xs)}
        a = a.assign(_x=[pos[x_of(r)] for _, r in a.iterrows()]).sort_values("_x")
        x = a["_x"].to_numpy() + 0.06 * (i - (len(policies) - 1) / 2)
        seeds = int(a["n_seeds"].max())
        ax.errorbar(x, a["gain_pts"], yerr=[a["gain_pts"] - a["gain_lo"], a["gain_hi"] - a["gain_pts"]],
                    color=policy_color(policy), marker="o", ms=5, capsize=3,
                    label=policy + (f" ({seeds} seeds)" if seeds > 1 else ""))
    ax.axhline(0, color="black", lw=1)
    ax.set_xticks(range(len(xs)), xs)
    ax.set_xlim(-0.5, len(xs) - 0.5)
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=7, title=f"bars: {s.level:.0%} interval", title_fontsize=7)


@output("gain_vs_setting", "figure", reads={"evals"}, when="sweep")
def figure_gain_vs_setting(runs: Listing, outs: Sequence[str], s: Analysis) -> None:
    """Gain over the base model (final checkpoint, with intervals) against each swept training setting, one line
    per policy; one panel per model, dataset, budget, swept setting and values of the other swept settings."""
    df = _in_distribution(gains_over_seeds(runs, s))
    swept = runs.swept()
    panels = []
    for (model, dataset, budget), g in (df.groupby(["model", "dataset", "budget"], sort=False) if len(df) else []):
        for key in swept:
            others = [k for k in swept if k != key]
            held = {v: tuple(format_value(runs.variants[v][o]) for o in others) for v in dict.fromkeys(g["variant"])}
            for combo in dict.fromkeys(held.values()):
                sub = g[g["variant"].map(held) == combo]
                panels.append(((model, dataset), f"{model} · {dataset} · budget {budget}", key, others, combo, sub))
    panels = panel_order(runs, panels)
    fig, axes = panel_grid(len(panels))
    for ax, (_, title, key, others, combo, sub) in zip(axes, panels):
        values = [v[key] for v in runs.variants.values() if key in v]
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            values = sorted(values)  # numbers in order along the axis, whatever order the sweep lists them in
        xs = list(dict.fromkeys(format_value(v) for v in values))
        _gain_lines(ax, sub, lambda r: format_value(runs.variants[r["variant"]][key]), xs, s)
        held = ", ".join(f"{label(o)} {c}" for o, c in zip(others, combo))
        ax.set(title=title + (f"\n{held}" if held else ""), xlabel=label(key),
               ylabel="gain over the base model (points)")
    if not panels:
        empty_panel(axes[0], "no sweep: nothing to plot")
    save_figure(fig, outs)


@output("gain_vs_budget", "figure", reads={"evals"}, when="budgets")
def figure_gain_vs_budget(runs: Listing, outs: Sequence[str], s: Analysis) -> None:
    """The budget curve: gain over the base model (final checkpoint, with intervals) against the budget, one line
    per policy; one panel per model, dataset (and sweep variant)."""
    df = _in_distribution(gains_over_seeds(runs, s))
    by = keys_in(df, ["model", "dataset", "variant"])
    groups = panel_order(runs, df.groupby(by, sort=False) if len(df) else [])
    fig, axes = panel_grid(len(groups))
    for ax, (key, g) in zip(axes, groups):
        xs = sorted(dict.fromkeys(g["budget"].astype(str)), key=budget_sort_key)
        _gain_lines(ax, g, lambda r: str(r["budget"]), xs, s)
        ax.set(title=" · ".join(map(str, key)), xlabel="budget (fraction of the pool, or items)",
               ylabel="gain over the base model (points)")
    if not groups:
        empty_panel(axes[0], "no evaluations")
    save_figure(fig, outs)


@output("gain_vs_competence", "figure", reads={"evals", "scores"}, when="models")
def figure_gain_vs_competence(runs: Listing, outs: Sequence[str], s: Analysis) -> None:
    """The regime map as a figure: each policy's gain over its base model (final checkpoint, with intervals)
    against the base model's pool mean pass rate, one line per policy; one panel per dataset and budget."""
    table = regime_table(runs, s)
    groups = list(table.groupby(keys_in(table, ["dataset", "budget", "variant"]), sort=False)) if len(table) else []
    fig, axes = panel_grid(len(groups))
    policies = sorted(policies_in(table), key=policy_rank)
    for ax, (key, g) in zip(axes, groups):
        g = g.sort_values("pool_mean")
        span = max(float(g["pool_mean"].max() - g["pool_mean"].min()), 0.05)
        for i, policy in enumerate(policies):
            if f"gain_{policy}" not in g or g[f"gain_{policy}"].isna().all():
                continue
            x = 100 * g["pool_mean"].to_numpy() + 100 * span * 0.012 * (i - (len(policies) - 1) / 2)
            y = g[f"gain_{policy}"].to_numpy()
            seeds = int(g[f"seeds_{policy}"].max())
            ax.errorbar(x, y, yerr=[y - g[f"gain_{policy}_lo"].to_numpy(), g[f"gain_{policy}_hi"].to_numpy() - y],
                        color=policy_color(policy), marker="o", ms=5, capsize=3,
                        label=policy + (f" ({seeds} seeds)" if seeds > 1 else ""))
        last, row = -np.inf, 0
        for _, r in g.iterrows():  # each base model named at its position; close neighbours' names stacked down
            row = row + 1 if 100 * r["pool_mean"] - last < 100 * span * 0.12 else 0
            last = 100 * r["pool_mean"]
            ax.text(last, 0.98 - 0.07 * row, f"{r['model']}\nbase {100 * r['base_acc']:.0f}%", ha="center",
                    va="top", fontsize=6, color="0.35", transform=ax.get_xaxis_transform())
        ax.axhline(0, color="black", lw=1)
        ax.set(title=" · ".join(map(str, key[:1])) + f" · budget {key[1]}" + (f" · {key[2]}" if len(key) > 2 else ""),
               xlabel="base model's pool mean pass rate (%)", ylabel="gain over the base model (points)")
        ax.grid(alpha=0.3)
        ax.margins(y=0.15)
        ax.legend(fontsize=7, title=f"bars: {s.level:.0%} interval", title_fontsize=7, loc="upper center",
                  bbox_to_anchor=(0.5, -0.18), ncol=min(len(policies), 5))
    if not groups:
        empty_panel(axes[0], "fewer than two base models: no map")
    save_figure(fig, outs)

"""The per-arm tables as files: the summary (with the answer from the verdicts), learnable opportunities,
difficulty tiers and out of distribution."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from grpo_budget import stats
from grpo_budget.aggregate.answer import answer_sentences, landing_rst, overlap_note, subset_overlap
from grpo_budget.aggregate.gains import gains_over_seeds, summary_table
from grpo_budget.aggregate.learnable import learnable_table
from grpo_budget.aggregate.outputs import output
from grpo_budget.aggregate.read import ARM, PANEL, arm_label, read_table, keys_in
from grpo_budget.aggregate.signal import signal_lines
from grpo_budget.aggregate.render import (
    row_label,
    formatted,
    section_heading,
    interval_text,
    mean_sd,
    pct,
    groups_of,
    with_variant,
    write_outputs,
)
from grpo_budget.aggregate.tiers import difficulty_table, ood_table
from grpo_budget.aggregate.verdicts import verdict_table
from grpo_budget.experiment.plan import Listing
from grpo_budget.config.settings import Analysis
from grpo_budget.io import atomic_path, read_json, write_text


@output("summary", "summary", reads={"evals", "logs", "subsets", "verify"})
def write_summary(runs: Listing, outs: list[str], s: Analysis) -> None:
    """``outs``: summary CSV (per seed), Markdown, and optionally the over-seeds CSV, an HTML page and the HTML
    report's landing text (reStructuredText)."""
    table = summary_table(runs, s)
    over = gains_over_seeds(runs, s)
    csv_out, md_out, *rest = outs
    if rest:
        with atomic_path(rest[0]) as tmp:
            over.to_csv(tmp, index=False)
    arm = keys_in(table, ARM)
    learn = table.groupby(arm, sort=False)[["learnable_pct", "predicted_learnable_pct"]].mean()
    sections = []
    for key, g in groups_of(over, PANEL):
        disp = pd.DataFrame({
            "policy": g["policy"], "budget": g["budget"], "seeds": g["n_seeds"],
            "base %": g["base_acc"].map(pct),
            "final %": [mean_sd(a, sd, n, ".1f", 100) for a, sd, n in zip(g["final_acc"], g["final_sd"], g["n_seeds"])],
            "best %": g["best_acc"].map(pct),
            "gain (pts)": [mean_sd(a, sd, n) for a, sd, n in zip(g["gain_pts"], g["gain_sd"], g["n_seeds"])],
            f"{s.level:.0%} interval": [interval_text(lo, hi) for lo, hi in zip(g["gain_lo"], g["gain_hi"])],
            "labels bought": g["labels_bought"].map(lambda x: formatted(x, ".0f")),
            "rel. gain": [formatted(100 * x, "+.1f") + "%" for x in g["rel_gain"]],
            "learnable %": [formatted(learn.loc[tuple(r[k] for k in arm), "learnable_pct"], ".1f") for _, r in g.iterrows()],
            "predicted %": [formatted(learn.loc[tuple(r[k] for k in arm), "predicted_learnable_pct"], ".1f")
                            for _, r in g.iterrows()],
        })
        disp = with_variant(disp, g)
        notes = []
        if len(g) > 1:
            top = g.loc[g["gain_pts"].idxmax()]
            bottom = g.loc[g["gain_pts"].idxmin()]
            notes.append(f"Largest gain: {row_label(top)}, {top['gain_pts']:+.1f} pts "
                         f"({s.level:.0%} interval {interval_text(top['gain_lo'], top['gain_hi'])}); "
                         f"smallest: {row_label(bottom)}, {bottom['gain_pts']:+.1f} pts "
                         f"{interval_text(bottom['gain_lo'], bottom['gain_hi'])}.")
        sections.append((section_heading(key), disp, notes))
    note = (f"Accuracy in %. Gain = final checkpoint − base model, in points, with a {s.level:.0%} paired "
            "bootstrap interval over test items (with several seeds: over seeds and items; ± = std over seeds). "
            "Best = the best checkpoint's accuracy on this test set (chosen on the test set itself, so optimistic). "
            "Rel. gain = gain / (100 − base): the share of the base model's headroom closed. Learnable = share of "
            "GRPO groups with non-zero reward std over all training steps; predicted = E[1 − pᴳ − (1 − p)ᴳ] over the "
            "subset, as the learnable table leads with it (fresh or empirical-Bayes pass rates). Labels bought = gold "
            "answers the arm needed: every pool item where its ranking graded the pool (a label or proxy source), "
            "else only its subset's for training. Per-seed rows: summary.csv.")
    note += " " + rewards_note(runs)
    with atomic_path(csv_out) as tmp:
        table.to_csv(tmp, index=False)
    lead = signal_lines(runs) + answer_sentences(verdict_table(runs, s), over)  # no reward variance: said first
    overlap = overlap_note(subset_overlap(subsets_by_policy(runs)))
    lead += ([overlap] if overlap else []) + ["Every pair of arms, with its interval: `tables/verdicts.md`."]
    write_outputs([None, md_out, rest[1] if len(rest) > 1 else None], table, "grpo-budget summary: gains", note,
                   sections, lead)
    if len(rest) > 2:
        write_text(landing_rst(lead, over, s.level), rest[2])


def subsets_by_policy(runs: Listing) -> dict[tuple, dict[str, list[set]]]:
    """Per (model, dataset, budget) and policy: the ids each seed's subset bought (a sweep's variants share them)."""
    out: dict[tuple, dict[str, dict[int, set]]] = {}
    for r in runs.runs:
        seeds = out.setdefault((r.model, r.dataset, r.budget), {}).setdefault(r.policy, {})
        if r.seed not in seeds:
            seeds[r.seed] = set(read_table(r.subset, ["id"])["id"])
    return {k: {p: [ids for _, ids in sorted(by_seed.items())] for p, by_seed in v.items()} for k, v in out.items()}


def rewards_note(runs: Listing) -> str:
    """The rewards each arm trained with, from its manifest (the evaluations read it first, so it is there): one
    sentence, naming the arms when they differ."""
    by_arm: dict[str, str] = {}
    for r in runs.runs:
        path = Path(r.manifest)
        weights = read_json(path).get("rewards", {"correct": 1.0}) if path.exists() else {"correct": 1.0}
        by_arm[arm_label(r.policy, r.budget, r.variant)] = " + ".join(f"{w:g} × {n}" for n, w in weights.items())
    kinds = set(by_arm.values())
    if len(kinds) <= 1:
        return f"Rewards: {next(iter(kinds), '1 × correct')}, every arm."
    return "Rewards: " + "; ".join(f"{arm}: {w}" for arm, w in by_arm.items()) + "."


@output("learnable", "table", reads={"logs", "subsets", "verify"})
def write_learnable(runs: Listing, outs: list[str], s: Analysis) -> None:
    table = learnable_table(runs, s)
    w = s.learnable_window
    window = f"the first {w:.0%} of logged steps" if isinstance(w, float) else f"the first {w} logged step(s)"
    sections = []
    for key, g in groups_of(table, ["model", "dataset"]):
        g = g.assign(_hits=g["observed_first_pct"] / 100 * g["window_groups"]).groupby(
            keys_in(g, ["policy", "budget", "variant"]), sort=False).agg(
            seeds=("seed", "size"), steps=("window_steps", "first"), groups=("window_groups", "sum"),
            hits=("_hits", "sum"), predicted=("predicted_pct", "mean"), source=("predicted_from", "first"),
            plugin=("predicted_plugin_pct", "mean"), posterior=("predicted_posterior_pct", "mean"),
            fresh=("predicted_fresh_pct", "mean"), every=("predicted_all_pct", "mean"),
            overall=("observed_all_pct", "mean"),
            G=("G", "first")).reset_index()
        # Pooled over seeds: the observed share and its Wilson interval count every seed's groups.
        observed = 100 * g["hits"] / g["groups"]
        bounds = [stats.wilson_interval(o / 100, n, s.level) for o, n in zip(observed, g["groups"])]
        lo, hi = (np.array([100 * b[i] for b in bounds]) for i in (0, 1))
        disp = pd.DataFrame({
            "policy": g["policy"], "budget": g["budget"], "seeds": g["seeds"], "groups": g["groups"].astype(int),
            "predicted %": [f"{formatted(x, '.1f')} ({src})" for x, src in zip(g["predicted"], g["source"])],
            "observed %": observed.map(lambda x: formatted(x, ".1f")),
            f"{s.level:.0%} interval": [interval_text(a, b, ".1f") for a, b in zip(lo, hi)],
            "observed − predicted": (observed - g["predicted"]).map(lambda x: formatted(x, "+.1f")),
            "prediction inside": ["yes" if a <= p <= b else "no" for p, a, b in zip(g["predicted"], lo, hi)],
            "plug-in %": g["plugin"].map(lambda x: formatted(x, ".1f")),
            "posterior %": g["posterior"].map(lambda x: formatted(x, ".1f")),
            "fresh %": g["fresh"].map(lambda x: formatted(x, ".1f")),
            "all %": g["every"].map(lambda x: formatted(x, ".1f")),
            "observed, all steps %": g["overall"].map(lambda x: formatted(x, ".1f")),
        })
        if "variant" in g:  # each variant predicts with its own group size
            disp = with_variant(disp, g)
            disp.insert(list(disp.columns).index("variant") + 1, "G", g["G"].to_numpy())
        sections.append((f"{key[0]} · {key[1]}", disp, []))
    note = (f"Share of GRPO groups (one prompt, G completions) whose rewards are not all equal, observed as "
            f"1 − frac_reward_zero_std over {window} (the first step samples the base model itself), pooled over "
            "seeds, with a Wilson interval over those groups; and predicted as the mean over the subset of "
            "E[1 − pᴳ − (1 − p)ᴳ]. Plug-in: p = the scored pass rate k/K (biased at the tails: the selection picked "
            "items whose k/K erred towards its cut). Posterior: p under each item's empirical-Bayes posterior, the "
            "pool's own Beta prior (fitted to every item's k of K) updated with the item's counts. Fresh: the prior "
            "updated with new samples of the selected items instead (`scoring.verify_samples`), which the selection "
            "did not pick on. All: the posterior updated with those new samples too, every sample of the item. The "
            "prediction leads with all where the new samples exist, else posterior. Observed, all steps: the "
            "paper's learnable %. Per-seed rows: the CSV.")
    write_outputs(outs, table, "Learnable opportunities: predicted vs observed", note, sections)


@output("difficulty", "table", reads={"evals", "tests"})
def write_difficulty(runs: Listing, outs: list[str], s: Analysis) -> None:
    per_seed = difficulty_table(runs, s)
    over = difficulty_table(runs, s, over_seeds=True)
    sections = []
    for key, g in groups_of(over, PANEL):
        wide, trunc = None, []
        for arm, a in g.groupby(keys_in(g, ["policy", "budget", "variant"]), sort=False):
            name = arm_label(*arm)
            col = pd.DataFrame({
                "tier": a["tier"].to_numpy(), "items": a["n_items"].to_numpy(),
                "base %": a["base_acc"].map(pct).to_numpy(),
                name: [f"{pct(f)} ({formatted(d, '+.1f')})" for f, d in zip(a["final_acc"], a["gain_pts"])],
                "base truncated %": a["base_truncated_share"].map(pct).to_numpy(),
                f"{name} truncated %": a["truncated_share"].map(pct).to_numpy()})
            trunc.append(f"{name} truncated %")
            on = ["tier", "items", "base %", "base truncated %"]
            wide = col if wide is None else wide.merge(col, on=on, how="outer", sort=False)
        wide = wide[[c for c in wide.columns if c != "base truncated %" and c not in trunc]
                    + ["base truncated %"] + trunc]
        notes = [f"Tiers: {g['stratify_by'].iloc[0]}. Cells: final accuracy % (gain in points over the base model "
                 "on the same items); intervals in the CSV. Truncated %: share of the base model's and of the final "
                 "checkpoint's completions (over seeds) on the tier's items cut at max_new_tokens (– where the "
                 "evaluation files do not record it)."]
        sections.append((section_heading(key), wide, notes))
    note = ("Accuracy by difficulty tier of the test items, before (base model) and after training (final "
            "checkpoint). With tiers from the base model's own per-item accuracy, the base column is that accuracy "
            "by construction and part of any change is regression to the mean; metadata tiers (level, n_objects, "
            "n_ops, n_steps) are free of this.")
    write_outputs(outs, per_seed, "Accuracy by difficulty tier", note, sections)


@output("ood", "table", reads={"ood_evals"}, needs_ood=True)
def write_ood(runs: Listing, outs: list[str], s: Analysis) -> None:
    per_seed = ood_table(runs, s)
    over = ood_table(runs, s, over_seeds=True)
    sections = []
    for key, g in groups_of(over, PANEL):
        disp = pd.DataFrame({
            "policy": g["policy"], "budget": g["budget"], "seeds": g["n_seeds"], "k": g["k"],
            "base pass@k %": g["base_acc"].map(pct),
            "trained pass@k %": [mean_sd(a, sd, n, ".1f", 100) for a, sd, n in zip(g["final_acc"], g["final_sd"], g["n_seeds"])],
            "gain (pts)": [mean_sd(a, sd, n) for a, sd, n in zip(g["gain_pts"], g["gain_sd"], g["n_seeds"])],
            f"{s.level:.0%} interval": [interval_text(lo, hi) for lo, hi in zip(g["gain_lo"], g["gain_hi"])],
        })
        sections.append((section_heading(key), with_variant(disp, g), []))
    note = ("Base model vs the final checkpoint of each arm on evaluation sets other than the training set "
            "(the dataset's `ood` list). pass@k is the unbiased estimator 1 − C(n − c, k)/C(n, k) per item (n samples, "
            f"c correct), averaged over items; pass@1 = accuracy. Intervals: {s.level:.0%} paired bootstrap over "
            "items (and seeds).")
    if over.empty:
        note += " No dataset of this configuration lists out-of-distribution sets."
    write_outputs(outs, per_seed, "Out-of-distribution accuracy", note, sections)

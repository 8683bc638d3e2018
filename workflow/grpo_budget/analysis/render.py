"""Writing tables: CSV per seed, Markdown and HTML per arm."""

from __future__ import annotations

import html
from collections.abc import Sequence

import numpy as np
import pandas as pd

from ..io import atomic_path, write_text
from ..plan import Listing
from ..settings import Analysis
from .outputs import output
from .read import ARM, PANEL, _label, as_settings
from .tables import difficulty_table, gains_over_seeds, learnable_table, ood_table, summary_table



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


@output("summary", "summary", reads={"evals", "logs", "subsets"})
def write_summary(runs: Listing, outs: list[str], settings: Analysis | dict) -> None:
    """``outs``: summary CSV (per seed), Markdown, and optionally the over-seeds CSV and an HTML page."""
    s = as_settings(settings)
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
            f"{s.level:.0%} interval": [_interval_text(lo, hi) for lo, hi in zip(g["gain_lo"], g["gain_hi"])],
            "rel. gain": [_f(100 * x, "+.1f") + "%" for x in g["rel_gain"]],
            "learnable %": [_f(learn.loc[tuple(r[k] for k in ARM), "learnable_pct"], ".1f") for _, r in g.iterrows()],
            "predicted %": [_f(learn.loc[tuple(r[k] for k in ARM), "predicted_learnable_pct"], ".1f")
                            for _, r in g.iterrows()],
        })
        notes = []
        if len(g) > 1:
            top = g.loc[g["gain_pts"].idxmax()]
            bottom = g.loc[g["gain_pts"].idxmin()]
            notes.append(f"Largest gain: {_label(top['policy'], top['budget'])}, {top['gain_pts']:+.1f} pts "
                         f"({s.level:.0%} interval {_interval_text(top['gain_lo'], top['gain_hi'])}); "
                         f"smallest: {_label(bottom['policy'], bottom['budget'])}, {bottom['gain_pts']:+.1f} pts "
                         f"{_interval_text(bottom['gain_lo'], bottom['gain_hi'])}.")
        sections.append((_heading(key), disp, notes))
    note = (f"Accuracy in %. Gain = final checkpoint − base model, in points, with a {s.level:.0%} paired "
            "bootstrap interval over test items (with several seeds: over seeds and items; ± = std over seeds). "
            "Best = the best checkpoint's accuracy on this test set (chosen on the test set itself, so optimistic). "
            "Rel. gain = gain / (100 − base): the share of the base model's headroom closed. Learnable = share of "
            "GRPO groups with non-zero reward std over all training steps; predicted = 1 − pᴳ − (1 − p)ᴳ from the "
            "subset's base pass rates. Per-seed rows: summary.csv.")
    with atomic_path(csv_out) as tmp:
        table.to_csv(tmp, index=False)
    _write_outputs([None, md_out, rest[1] if len(rest) > 1 else None], table,
                   "grpo-budget summary: gains", note, sections)


@output("learnable", "table", reads={"logs", "subsets"})
def write_learnable(runs: Listing, outs: list[str], settings: Analysis | dict) -> None:
    s = as_settings(settings)
    table = learnable_table(runs, s)
    w = s.learnable_window
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
            f"{s.level:.0%} interval": [_interval_text(lo, hi, ".1f") for lo, hi in zip(g["lo"], g["hi"])],
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


@output("difficulty", "table", reads={"evals", "tests"})
def write_difficulty(runs: Listing, outs: list[str], settings: Analysis | dict) -> None:
    s = as_settings(settings)
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


@output("ood", "table", reads={"ood_evals"}, needs_ood=True)
def write_ood(runs: Listing, outs: list[str], settings: Analysis | dict) -> None:
    s = as_settings(settings)
    per_seed = ood_table(runs, s)
    over = ood_table(runs, s, over_seeds=True)
    sections = []
    for key, g in _sections(over, PANEL):
        disp = pd.DataFrame({
            "policy": g["policy"], "budget": g["budget"], "seeds": g["n_seeds"], "k": g["k"],
            "base pass@k %": g["base_acc"].map(_pct),
            "trained pass@k %": [_mean_sd(a, sd, n, ".1f", 100) for a, sd, n in zip(g["final_acc"], g["final_sd"], g["n_seeds"])],
            "gain (pts)": [_mean_sd(a, sd, n) for a, sd, n in zip(g["gain_pts"], g["gain_sd"], g["n_seeds"])],
            f"{s.level:.0%} interval": [_interval_text(lo, hi) for lo, hi in zip(g["gain_lo"], g["gain_hi"])],
        })
        sections.append((_heading(key), disp, []))
    note = ("Base model vs the final checkpoint of each arm on evaluation sets other than the training set "
            "(the dataset's `ood` list). pass@k is the unbiased estimator 1 − C(n − c, k)/C(n, k) per item (n samples, "
            f"c correct), averaged over items; pass@1 = accuracy. Intervals: {s.level:.0%} paired bootstrap over "
            "items (and seeds).")
    if over.empty:
        note += " No dataset of this configuration lists out-of-distribution sets."
    _write_outputs(outs, per_seed, "Out-of-distribution accuracy", note, sections)

"""Writing tables: CSV per seed, Markdown and HTML per arm."""

from __future__ import annotations

import html
import json
from collections.abc import Sequence

import numpy as np
import pandas as pd

from grpo_budget import stats
from grpo_budget.aggregate.outputs import output
from grpo_budget.aggregate.read import ARM, PANEL, _label, as_settings, keys_in
from grpo_budget.experiment.plan import Listing
from grpo_budget.experiment.settings import Analysis
from grpo_budget.io import atomic_path, write_text

from .tables import (
    FULL_POLICY,
    difficulty_table,
    gains_over_seeds,
    label_free_calibration,
    learnable_table,
    ood_table,
    rankings,
    steps_to_match,
    summary_table,
    verdict_table,
)


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


def _with_variant(disp: pd.DataFrame, g: pd.DataFrame, after: str = "budget") -> pd.DataFrame:
    """A display frame with the arms' sweep variant after column ``after`` (where the table has variants)."""
    if "variant" not in g:
        return disp
    disp = disp.copy()
    disp.insert(list(disp.columns).index(after) + 1, "variant", g["variant"].to_numpy())
    return disp


def _arm(row) -> str:
    return _label(row["policy"], row["budget"], row.get("variant", ""))


@output("summary", "summary", reads={"evals", "logs", "subsets", "verify"})
def write_summary(runs: Listing, outs: list[str], settings: Analysis | dict) -> None:
    """``outs``: summary CSV (per seed), Markdown, and optionally the over-seeds CSV and an HTML page."""
    s = as_settings(settings)
    table = summary_table(runs, s)
    over = gains_over_seeds(runs, s)
    csv_out, md_out, *rest = outs
    if rest:
        with atomic_path(rest[0]) as tmp:
            over.to_csv(tmp, index=False)
    arm = keys_in(table, ARM)
    learn = table.groupby(arm, sort=False)[["learnable_pct", "predicted_learnable_pct"]].mean()
    sections = []
    for key, g in _sections(over, PANEL):
        disp = pd.DataFrame({
            "policy": g["policy"], "budget": g["budget"], "seeds": g["n_seeds"],
            "base %": g["base_acc"].map(_pct),
            "final %": [_mean_sd(a, sd, n, ".1f", 100) for a, sd, n in zip(g["final_acc"], g["final_sd"], g["n_seeds"])],
            "best %": g["best_acc"].map(_pct),
            "gain (pts)": [_mean_sd(a, sd, n) for a, sd, n in zip(g["gain_pts"], g["gain_sd"], g["n_seeds"])],
            f"{s.level:.0%} interval": [_interval_text(lo, hi) for lo, hi in zip(g["gain_lo"], g["gain_hi"])],
            "labels bought": g["labels_bought"].map(lambda x: _f(x, ".0f")),
            "rel. gain": [_f(100 * x, "+.1f") + "%" for x in g["rel_gain"]],
            "learnable %": [_f(learn.loc[tuple(r[k] for k in arm), "learnable_pct"], ".1f") for _, r in g.iterrows()],
            "predicted %": [_f(learn.loc[tuple(r[k] for k in arm), "predicted_learnable_pct"], ".1f")
                            for _, r in g.iterrows()],
        })
        disp = _with_variant(disp, g)
        notes = []
        if len(g) > 1:
            top = g.loc[g["gain_pts"].idxmax()]
            bottom = g.loc[g["gain_pts"].idxmin()]
            notes.append(f"Largest gain: {_arm(top)}, {top['gain_pts']:+.1f} pts "
                         f"({s.level:.0%} interval {_interval_text(top['gain_lo'], top['gain_hi'])}); "
                         f"smallest: {_arm(bottom)}, {bottom['gain_pts']:+.1f} pts "
                         f"{_interval_text(bottom['gain_lo'], bottom['gain_hi'])}.")
        sections.append((_heading(key), disp, notes))
    note = (f"Accuracy in %. Gain = final checkpoint − base model, in points, with a {s.level:.0%} paired "
            "bootstrap interval over test items (with several seeds: over seeds and items; ± = std over seeds). "
            "Best = the best checkpoint's accuracy on this test set (chosen on the test set itself, so optimistic). "
            "Rel. gain = gain / (100 − base): the share of the base model's headroom closed. Learnable = share of "
            "GRPO groups with non-zero reward std over all training steps; predicted = E[1 − pᴳ − (1 − p)ᴳ] over the "
            "subset, as the learnable table leads with it (fresh or empirical-Bayes pass rates). Labels bought = gold "
            "answers the arm needed: every pool item where its ranking graded the pool (a label or proxy source), "
            "else only its subset's for training. Per-seed rows: summary.csv.")
    with atomic_path(csv_out) as tmp:
        table.to_csv(tmp, index=False)
    answer = answer_sentences(verdict_table(runs, s), s.level)
    if answer:
        note = "The answer: " + " ".join(answer) + " (details: tables/verdicts.md)\n\n" + note
    _write_outputs([None, md_out, rest[1] if len(rest) > 1 else None], table,
                   "grpo-budget summary: gains", note, sections)


@output("learnable", "table", reads={"logs", "subsets", "verify"})
def write_learnable(runs: Listing, outs: list[str], settings: Analysis | dict) -> None:
    s = as_settings(settings)
    table = learnable_table(runs, s)
    w = s.learnable_window
    window = f"the first {w:.0%} of logged steps" if isinstance(w, float) else f"the first {w} logged step(s)"
    sections = []
    for key, g in _sections(table, ["model", "dataset"]):
        g = g.assign(_hits=g["observed_first_pct"] / 100 * g["window_groups"]).groupby(
            keys_in(g, ["policy", "budget", "variant"]), sort=False).agg(
            seeds=("seed", "size"), steps=("window_steps", "first"), groups=("window_groups", "sum"),
            hits=("_hits", "sum"), predicted=("predicted_pct", "mean"), source=("predicted_from", "first"),
            plugin=("predicted_plugin_pct", "mean"), posterior=("predicted_posterior_pct", "mean"),
            fresh=("predicted_fresh_pct", "mean"), overall=("observed_all_pct", "mean"),
            G=("G", "first")).reset_index()
        # Pooled over seeds: the observed share and its Wilson interval count every seed's groups.
        observed = 100 * g["hits"] / g["groups"]
        bounds = [stats.wilson_interval(o / 100, n, s.level) for o, n in zip(observed, g["groups"])]
        lo, hi = (np.array([100 * b[i] for b in bounds]) for i in (0, 1))
        disp = pd.DataFrame({
            "policy": g["policy"], "budget": g["budget"], "seeds": g["seeds"], "groups": g["groups"].astype(int),
            "predicted %": [f"{_f(x, '.1f')} ({src})" for x, src in zip(g["predicted"], g["source"])],
            "observed %": observed.map(lambda x: _f(x, ".1f")),
            f"{s.level:.0%} interval": [_interval_text(a, b, ".1f") for a, b in zip(lo, hi)],
            "observed − predicted": (observed - g["predicted"]).map(lambda x: _f(x, "+.1f")),
            "prediction inside": ["yes" if a <= p <= b else "no" for p, a, b in zip(g["predicted"], lo, hi)],
            "plug-in %": g["plugin"].map(lambda x: _f(x, ".1f")),
            "posterior %": g["posterior"].map(lambda x: _f(x, ".1f")),
            "fresh %": g["fresh"].map(lambda x: _f(x, ".1f")),
            "observed, all steps %": g["overall"].map(lambda x: _f(x, ".1f")),
        })
        if "variant" in g:  # each variant predicts with its own group size
            disp = _with_variant(disp, g)
            disp.insert(list(disp.columns).index("variant") + 1, "G", g["G"].to_numpy())
        sections.append((f"{key[0]} · {key[1]}", disp, []))
    note = (f"Share of GRPO groups (one prompt, G completions) whose rewards are not all equal, observed as "
            f"1 − frac_reward_zero_std over {window} (the first step samples the base model itself), pooled over "
            "seeds, with a Wilson interval over those groups; and predicted as the mean over the subset of "
            "E[1 − pᴳ − (1 − p)ᴳ]. Plug-in: p = the scored pass rate k/K (biased at the tails: the selection picked "
            "items whose k/K erred towards its cut). Posterior: p under each item's empirical-Bayes posterior, the "
            "pool's own Beta prior (fitted to every item's k of K) updated with the item's counts. Fresh: the same "
            "posterior from new samples of the selected items (`scoring.verify_samples`), free of the selection's "
            "winner's curse. The prediction leads with fresh where it exists, else posterior. Observed, all steps: "
            "the paper's learnable %. Per-seed rows: the CSV.")
    _write_outputs(outs, table, "Learnable opportunities: predicted vs observed", note, sections)


@output("difficulty", "table", reads={"evals", "tests"})
def write_difficulty(runs: Listing, outs: list[str], settings: Analysis | dict) -> None:
    s = as_settings(settings)
    per_seed = difficulty_table(runs, s)
    over = difficulty_table(runs, s, over_seeds=True)
    sections = []
    for key, g in _sections(over, PANEL):
        wide, trunc = None, []
        for arm, a in g.groupby(keys_in(g, ["policy", "budget", "variant"]), sort=False):
            name = _label(*arm)
            col = pd.DataFrame({
                "tier": a["tier"].to_numpy(), "items": a["n_items"].to_numpy(),
                "base %": a["base_acc"].map(_pct).to_numpy(),
                name: [f"{_pct(f)} ({_f(d, '+.1f')})" for f, d in zip(a["final_acc"], a["gain_pts"])],
                "base truncated %": a["base_truncated_share"].map(_pct).to_numpy(),
                f"{name} truncated %": a["truncated_share"].map(_pct).to_numpy()})
            trunc.append(f"{name} truncated %")
            on = ["tier", "items", "base %", "base truncated %"]
            wide = col if wide is None else wide.merge(col, on=on, how="outer", sort=False)
        wide = wide[[c for c in wide.columns if c != "base truncated %" and c not in trunc]
                    + ["base truncated %"] + trunc]
        notes = [f"Tiers: {g['stratify_by'].iloc[0]}. Cells: final accuracy % (gain in points over the base model "
                 "on the same items); intervals in the CSV. Truncated %: share of the base model's and of the final "
                 "checkpoint's completions (over seeds) on the tier's items cut at max_new_tokens (– where the "
                 "evaluation files do not record it)."]
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
        sections.append((_heading(key), _with_variant(disp, g), []))
    note = ("Base model vs the final checkpoint of each arm on evaluation sets other than the training set "
            "(the dataset's `ood` list). pass@k is the unbiased estimator 1 − C(n − c, k)/C(n, k) per item (n samples, "
            f"c correct), averaged over items; pass@1 = accuracy. Intervals: {s.level:.0%} paired bootstrap over "
            "items (and seeds).")
    if over.empty:
        note += " No dataset of this configuration lists out-of-distribution sets."
    _write_outputs(outs, per_seed, "Out-of-distribution accuracy", note, sections)


@output("verdicts", "table", reads={"evals"})
def write_verdicts(runs: Listing, outs: list[str], settings: Analysis | dict) -> None:
    s = as_settings(settings)
    table = verdict_table(runs, s)
    sections = []
    for key, g in _sections(table, PANEL + keys_in(table, ["budget", "variant"])):
        disp = pd.DataFrame({
            "A": g["arm_a"], "B": g["arm_b"], "seeds": [f"{a}/{b}" for a, b in zip(g["seeds_a"], g["seeds_b"])],
            "A %": g["acc_a"].map(_pct), "B %": g["acc_b"].map(_pct),
            "A − B (pts)": g["diff_pts"].map(lambda x: _f(x, "+.1f")),
            f"{s.level:.0%} interval": [_interval_text(lo, hi) for lo, hi in zip(g["diff_lo"], g["diff_hi"])],
            "verdict": g["verdict"],
            "best ckpt: A − B": [f"{_f(d, '+.1f')} {_interval_text(lo, hi)}"
                                 for d, lo, hi in zip(g["best_diff_pts"], g["best_diff_lo"], g["best_diff_hi"])],
            "best-ckpt verdict": g["best_verdict"],
        })
        ranks = rankings(g)
        notes = ["Ranking (final checkpoint; arms share a rank unless distinguishable): "
                 + ", ".join(f"{r['rank']}. {r['policy']} ({_pct(r['acc'])}%)" for _, r in ranks.iterrows()) + "."]
        sections.append((_heading(key[:3]) + f" · budget {key[3]}" + (f" · variant {key[4]}" if len(key) > 4 else ""),
                         disp, notes))
    note = (f"Every pair of policies trained on the same model, dataset and budget, on the same test items: the "
            f"difference A − B in test accuracy (points) at the final checkpoint and at each seed's best checkpoint "
            f"(chosen on the test set, so optimistic), with a {s.level:.0%} paired bootstrap interval that "
            "resamples test items (shared by both arms) and, when an arm ran several seeds, its seeds (so "
            "run-to-run variance counts). Verdict: A or B better when the interval excludes 0, else not "
            "distinguishable. An arm's rank is 1 + the number of arms distinguishably better than it.")
    _write_outputs(outs, table, "Which subset bought more: arm against arm", note, sections)


def answer_sentences(verdicts: pd.DataFrame, level: float) -> list[str]:
    """The answer, one sentence per model × dataset × budget (in distribution), from the verdict table: the
    first-ranked arms, and for each the arms it is distinguishably better than and those it cannot be told from."""
    lines = []
    own = verdicts[~verdicts["ood"].astype(bool)] if len(verdicts) else verdicts
    for key, g in _sections(own, PANEL + keys_in(own, ["budget", "variant"])):
        model, dataset, _, budget = key[:4]
        budget = f"{budget} · {key[4]}" if len(key) > 4 else budget
        ranks = rankings(g)
        seeds = int(ranks["seeds"].min())
        how = (f"at {level:.0%}, {seeds} seed{'s' if seeds > 1 else ''} per arm, paired intervals over test items"
               + (" and seeds" if seeds > 1 else ""))
        accs = ", ".join(f"{p} {_pct(a)}%" for p, a in zip(ranks["policy"], ranks["acc"]))
        head = f"**{model} · {dataset} · budget {budget}** (base {_pct(ranks['base_acc'].iloc[0])}%): "
        clauses = []
        for leader in ranks.loc[ranks["rank"] == 1, "policy"]:
            mine = g[(g["arm_a"] == leader) | (g["arm_b"] == leader)]
            other = np.where(mine["arm_a"] == leader, mine["arm_b"], mine["arm_a"])
            beats = [o for o, v in zip(other, mine["verdict"]) if v == f"{leader} better"]
            ties = [o for o, v in zip(other, mine["verdict"]) if v == "not distinguishable"]
            clause = f"{leader} ranks first"
            clause += f", distinguishably above {', '.join(beats)}" if beats else ", above no arm distinguishably"
            clause += f", not distinguishable from {', '.join(ties)}" if ties else ""
            clauses.append(clause)
        lines.append(head + "; ".join(clauses) + f" ({how}; final accuracy {accs}).")
    return lines


@output("steps_to_match", "table", reads={"evals"})
def write_steps_to_match(runs: Listing, outs: list[str], settings: Analysis | dict) -> None:
    s = as_settings(settings)
    table = steps_to_match(runs, s)
    sections = []
    for key, g in _sections(table, PANEL + keys_in(table, ["variant"])):
        first = g.iloc[0]

        def curve(row) -> str:
            acc = json.loads(row["checkpoint_acc"])
            return " · ".join(f"{st}: {_pct(a)}" + (" ✓" if row["matched"] and int(st) == row["match_step"] else "")
                              for st, a in acc.items())

        disp = pd.DataFrame({
            "policy": g["policy"], "budget": g["budget"], "seeds": g["seeds"], "final step": g["final_step"],
            "final %": g["final_acc"].map(_pct),
            "matches at step": [str(int(m)) if ok else "never" for m, ok in zip(g["match_step"], g["matched"])],
            "of own steps": [_f(100 * x, ".0f") + "%" if ok else "–"
                             for x, ok in zip(g["match_fraction_of_own"], g["matched"])],
            "of full's steps": [_f(100 * x, ".0f") + "%" if ok else "–"
                                for x, ok in zip(g["match_fraction_of_full"], g["matched"])],
            "% at match": g["acc_at_match"].map(_pct),
            "accuracy % by checkpoint": [curve(r) for _, r in g.iterrows()],
        })
        disp = _with_variant(disp, g)
        notes = [f"Full data ({FULL_POLICY}, {first['full_seeds']} seed{'s' if first['full_seeds'] > 1 else ''}, "
                 f"step {first['full_final_step']}): {_pct(first['full_final_acc'])}% "
                 f"[{_pct(first['full_lo'])}, {_pct(first['full_hi'])}] at {s.level:.0%}; an arm matches it at the "
                 f"first checkpoint at or above {_pct(first['full_lo'])}%."]
        sections.append((_heading(key[:3]) + (f" · variant {key[3]}" if len(key) > 3 else ""), disp, notes))
    note = (f"How many training steps each arm needs to match the full-data arm (policy `{FULL_POLICY}`): the first "
            "checkpoint whose accuracy (mean over the arm's seeds, at the steps all of them share) reaches the full "
            f"arm's final accuracy within its {s.level:.0%} bootstrap interval (over seeds and test items), i.e. at "
            "or above the interval's lower bound; that step as a share of the arm's own final step and of the full "
            "arm's final step, or never. Every arm of the same model, dataset and test set is compared with the "
            "full arm, whatever its budget. Checkpoints are tested on the test set itself, so an early match is "
            "chosen among several noisy looks. Per-arm rows, with each checkpoint's accuracy: the CSV.")
    if table.empty:
        if not any(r.policy == FULL_POLICY for r in runs.runs):
            note += f" This configuration has no `{FULL_POLICY}` arm, so there is nothing to match."
        else:
            note += f" No other arm shares a model, dataset and test set with the `{FULL_POLICY}` arm."
    _write_outputs(outs, table, "Steps to match full-data accuracy", note, sections)


@output("label_free", "table", reads={"scores", "proxy_scores", "subsets"}, when="label_free")
def write_label_free(runs: Listing, outs: list[str], settings: Analysis | dict) -> None:
    s = as_settings(settings)
    table = label_free_calibration(runs, s)
    sections = []
    for (model, dataset), g in _sections(table, ["model", "dataset"]):
        rho = g[g["measure"] == "rho"]
        disp = pd.DataFrame({"source": rho["source"], "Spearman ρ vs gold": rho["value"].map(lambda x: _f(x, ".2f")),
                             f"{s.level:.0%} interval": [_interval_text(lo, hi, ".2f") for lo, hi in
                                                         zip(rho["lo"], rho["hi"])],
                             "items": rho["items"]})
        for at in dict.fromkeys(g.loc[g["measure"] == "overlap", "at"]):
            ov = g[(g["measure"] == "overlap") & (g["at"] == at)].set_index("source")["value"]
            disp[f"overlap {at}"] = [_pct(ov.get(src, np.nan)) + "%" if src in ov else "–" for src in rho["source"]]
        sections.append((f"{model} · {dataset}: each source against the gold pass rate", disp, []))
        cw = g[g["measure"] == "confident_wrong"]
        if len(cw):
            wide = pd.DataFrame({"tier (gold pass rate)": [a.removeprefix("tier ") for a in cw["at"]],
                                 "source": cw["source"], "items": cw["items"],
                                 "confident wrong majority %": [f"{_pct(v)} {_interval_text(lo, hi, '.1f', 100)}"
                                                                for v, lo, hi in zip(cw["value"], cw["lo"], cw["hi"])]})
            sections.append((f"{model} · {dataset}: confident wrong majorities by tier", wide, []))
    note = ("How well each difficulty source that needs no gold answers (agreement: the share of the trained model's "
            "samples giving their majority answer; answer_entropy, negated; proxy_agreement: the proxy model's) or no "
            "scoring by the trained model (proxy: the proxy's gold pass rate) ranks the pool like the trained model's "
            f"gold pass rate (the empirical-Bayes estimate from the same samples). ρ: Spearman, {s.level:.0%} "
            "bootstrap interval over pool items. Overlap: the share of a policy's label-selected subset that the "
            "source selects too. Confident wrong: items whose majority answer is wrong though more than half the "
            f"samples give it, with a {s.level:.0%} Wilson interval: the items agreement ranks as easy although "
            "the model fails them.")
    if table.empty:
        note += " No pool here has gold answers to check against."
    _write_outputs(outs, table, "Difficulty without labels: each source against the gold pass rate", note, sections)

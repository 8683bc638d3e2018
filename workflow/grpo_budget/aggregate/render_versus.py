"""The comparison tables as files: arm against arm, steps to match the full-data arm, and each label-free source
against the gold pass rate."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from grpo_budget.aggregate.answer import answer_sentences
from grpo_budget.aggregate.calibration import label_free_calibration
from grpo_budget.aggregate.gains import gains_over_seeds
from grpo_budget.aggregate.outputs import output
from grpo_budget.aggregate.read import PANEL, keys_in
from grpo_budget.aggregate.regime import policies_in, regime_table
from grpo_budget.aggregate.render import (
    formatted,
    section_heading,
    interval_text,
    pair_columns,
    pct,
    groups_of,
    seeds_text,
    with_variant,
    write_outputs,
)
from grpo_budget.aggregate.render_compute import COMPUTE_READS, tokens_text
from grpo_budget.aggregate.variants import variant_verdicts
from grpo_budget.aggregate.verdicts import FULL_POLICY, rankings, steps_to_match, verdict_table
from grpo_budget.experiment.plan import Listing
from grpo_budget.config.settings import Analysis
from grpo_budget.power import MAX_SEEDS, POWER


@output("verdicts", "table", reads={"evals"})
def write_verdicts(runs: Listing, outs: list[str], s: Analysis) -> None:
    table = verdict_table(runs, s)
    sections = []
    for key, g in groups_of(table, PANEL + keys_in(table, ["budget", "variant"])):
        disp = pd.DataFrame({
            **pair_columns(g, "arm_a", "arm_b", s.level),
            "detectable (pts)": g["detectable_pts"].map(lambda x: formatted(x, ".1f")),
            "seeds to decide": [seeds_text(n, a, b) or "–"
                                for n, a, b in zip(g["seeds_needed"], g["seeds_a"], g["seeds_b"])],
            "best ckpt: A − B": [f"{formatted(d, '+.1f')} {interval_text(lo, hi)}"
                                 for d, lo, hi in zip(g["best_diff_pts"], g["best_diff_lo"], g["best_diff_hi"])],
            "best-ckpt verdict": g["best_verdict"],
        })
        ranks = rankings(g)
        notes = ["Ranking (final checkpoint; arms share a rank unless distinguishable): "
                 + ", ".join(f"{r['rank']}. {r['policy']} ({pct(r['acc'])}%)" for _, r in ranks.iterrows()) + "."]
        title = section_heading(key[:3]) + f" · budget {key[3]}" + (f" · variant {key[4]}" if len(key) > 4 else "")
        sections.append((title, disp, notes))
    note = (f"Every pair of policies trained on the same model, dataset and budget, on the same test items: the "
            f"difference A − B in test accuracy (points) at the final checkpoint and at each seed's best checkpoint "
            f"(chosen on the test set, so optimistic), with a {s.level:.0%} paired bootstrap interval that "
            "resamples test items (shared by both arms) and, when an arm ran several seeds, its seeds (so "
            "run-to-run variance counts). Verdict: A or B better when the interval excludes 0, else not "
            "distinguishable. An arm's rank is 1 + the number of arms distinguishably better than it. Detectable: the "
            f"smallest true difference (final checkpoint) these seeds and items decide with {POWER:.0%} power in this "
            "bootstrap; seeds to decide (undecided pairs): the seeds per arm, on the same items, that would decide "
            f"the observed difference with {POWER:.0%} power, or more test items needed (the items alone leave it "
            f"undecided, or it takes over {MAX_SEEDS} seeds).")
    write_outputs(outs, table, "Which subset bought more: arm against arm", note, sections,
                   answer_sentences(table, gains_over_seeds(runs, s, bought=False)))


@output("steps_to_match", "table", reads={"evals"})
def write_steps_to_match(runs: Listing, outs: list[str], s: Analysis) -> None:
    table = steps_to_match(runs, s)
    sections = []
    for key, g in groups_of(table, PANEL + keys_in(table, ["variant"])):
        first = g.iloc[0]

        def curve(row) -> str:
            acc = json.loads(row["checkpoint_acc"])
            return " · ".join(f"{st}: {pct(a)}" + (" ✓" if row["matched"] and int(st) == row["match_step"] else "")
                              for st, a in acc.items())

        disp = pd.DataFrame({
            "policy": g["policy"], "budget": g["budget"], "seeds": g["seeds"], "final step": g["final_step"],
            "final %": g["final_acc"].map(pct),
            "matches at step": [str(int(m)) if ok else "never" for m, ok in zip(g["match_step"], g["matched"])],
            "of own steps": [formatted(100 * x, ".0f") + "%" if ok else "–"
                             for x, ok in zip(g["match_fraction_of_own"], g["matched"])],
            "of full's steps": [formatted(100 * x, ".0f") + "%" if ok else "–"
                                for x, ok in zip(g["match_fraction_of_full"], g["matched"])],
            "% at match": g["acc_at_match"].map(pct),
            "accuracy % by checkpoint": [curve(r) for _, r in g.iterrows()],
        })
        disp = with_variant(disp, g)
        notes = [f"Full data ({FULL_POLICY}, {first['full_seeds']} seed{'s' if first['full_seeds'] > 1 else ''}, "
                 f"step {first['full_final_step']}): {pct(first['full_final_acc'])}% "
                 f"[{pct(first['full_lo'])}, {pct(first['full_hi'])}] at {s.level:.0%}; an arm matches it at the "
                 f"first checkpoint at or above {pct(first['full_lo'])}%."]
        sections.append((section_heading(key[:3]) + (f" · variant {key[3]}" if len(key) > 3 else ""), disp, notes))
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
    write_outputs(outs, table, "Steps to match full-data accuracy", note, sections)


@output("label_free", "table", reads={"scores", "proxy_scores", "subsets"}, when="label_free")
def write_label_free(runs: Listing, outs: list[str], s: Analysis) -> None:
    table = label_free_calibration(runs, s)
    sections = []
    for (model, dataset), g in groups_of(table, ["model", "dataset"]):
        rho = g[g["measure"] == "rho"]
        disp = pd.DataFrame({"source": rho["source"],
                             "Spearman ρ vs gold": rho["value"].map(lambda x: formatted(x, ".2f")),
                             f"{s.level:.0%} interval": [interval_text(lo, hi, ".2f") for lo, hi in
                                                         zip(rho["lo"], rho["hi"])],
                             "items": rho["items"]})
        for at in dict.fromkeys(g.loc[g["measure"] == "overlap", "at"]):
            ov = g[(g["measure"] == "overlap") & (g["at"] == at)].set_index("source")["value"]
            disp[f"overlap {at}"] = [pct(ov.get(src, np.nan)) + "%" if src in ov else "–" for src in rho["source"]]
        sections.append((f"{model} · {dataset}: each source against the gold pass rate", disp, []))
        cw = g[g["measure"] == "confident_wrong"]
        if len(cw):
            wide = pd.DataFrame({"tier (gold pass rate)": [a.removeprefix("tier ") for a in cw["at"]],
                                 "source": cw["source"], "items": cw["items"],
                                 "confident wrong majority %": [f"{pct(v)} {interval_text(lo, hi, '.1f', 100)}"
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
    write_outputs(outs, table, "Difficulty without labels: each source against the gold pass rate", note, sections)


@output("variant_verdicts", "table", reads=COMPUTE_READS, when="sweep")
def write_variant_verdicts(runs: Listing, outs: list[str], s: Analysis) -> None:
    table = variant_verdicts(runs, s)
    sections = []
    for key, g in groups_of(table, PANEL + ["policy", "budget"]):
        disp = pd.DataFrame({
            **pair_columns(g, "variant_a", "variant_b", s.level, seeds_to_decide=True),
            "matched tokens": g["tokens"].map(tokens_text),
            "at matched tokens: A − B": [f"{formatted(d, '+.1f')} {interval_text(lo, hi)}" for d, lo, hi
                                         in zip(g["tok_diff_pts"], g["tok_diff_lo"], g["tok_diff_hi"])],
            "matched-tokens verdict": g["tok_verdict"],
        })
        sections.append((section_heading(key[:3]) + f" · {key[3]} @ {key[4]}", disp, []))
    note = ("Every pair of training variants (methods, settings) of the same arm, a policy at a budget, on the same "
            "test items: A − B in test accuracy (points) at the final checkpoint, where every variant has trained "
            f"the same steps, and at the pair's matched compute, the most generated tokens every seed of both reached "
            "(scoring included; accuracy interpolated per item between checkpoints), each with a "
            f"{s.level:.0%} paired bootstrap interval over test items and seeds. Seeds to decide: as in the verdicts "
            "table.")
    write_outputs(outs, table, "Which way of training won: variant against variant", note, sections)


@output("regime", "table", reads={"evals", "scores"}, when="models")
def write_regime(runs: Listing, outs: list[str], s: Analysis) -> None:
    table = regime_table(runs, s)
    policies = policies_in(table)
    sections = []
    for key, g in groups_of(table, keys_in(table, ["dataset", "budget", "variant"])):
        disp = pd.DataFrame({
            "model": g["model"], "base %": g["base_acc"].map(pct), "pool mean %": g["pool_mean"].map(pct),
            "at 0 %": g["share_zero"].map(pct), "mixed %": g["share_mixed"].map(pct),
            "at 1 %": g["share_one"].map(pct), "samples/item": g["mean_samples"].map(lambda x: formatted(x, ".1f")),
            **{p: [f"{formatted(v, '+.1f')} {interval_text(lo, hi)}" for v, lo, hi in
                   zip(g[f"gain_{p}"], g[f"gain_{p}_lo"], g[f"gain_{p}_hi"])] for p in policies},
            "first (nothing beats it)": g["first"], "winners": g["winners"].replace("", "none decided"),
        })
        sections.append((" · ".join(map(str, key[:1])) + f" · budget {key[1]}"
                         + (f" · variant {key[2]}" if len(key) > 2 else ""), disp, []))
    note = ("Which subset pays, base model by base model (rows ordered by the pool's mean pass rate). The pool's "
            "profile comes from each model's own score table: its mean pass rate and the shares of items with no "
            "correct sample (at 0), mixed outcomes, and every sample correct (at 1), over each item's samples. "
            f"Each arm's cell: its gain over the base model in points with its {s.level:.0%} interval (over test "
            "items and seeds). First: the arms no other arm beats distinguishably (the verdicts table); winners: "
            "those of them that beat some arm.")
    write_outputs(outs, table, "The regime map: which subset pays for which base model", note, sections)

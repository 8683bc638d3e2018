"""The answer a reader can act on: one short sentence per model × dataset × budget (in distribution), built from the
verdict table (which arm is distinguishably better than which) and each arm's gain over the base model.

Three cases (:func:`sentence`): some arms are distinguishably better (the winners, by how much, what they beat, then
the arms nothing separates from them); nothing is distinguishable (said once, with the range of gains, the smallest
difference these runs detect and what would settle the largest gap); one arm alone. The same sentences head
``summary.md``, ``tables/verdicts.md`` and the HTML report.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

import numpy as np
import pandas as pd

from grpo_budget.aggregate.render import read_answer
from grpo_budget.power import POWER

MAX_CHARS = 300  # a sentence's length goal (the tests hold it for up to five arms)


def _pts(x: float) -> str:
    return f"{x:+.1f}".replace("-", "−")


def _interval(lo: float, hi: float) -> str:
    return f"[{_pts(lo)}, {_pts(hi)}]"


def _names(items: Sequence[str]) -> str:
    items = list(items)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _gain(g: dict) -> str:
    return f"{_pts(g['gain_pts'])} {_interval(g['gain_lo'], g['gain_hi'])}"


def _settle(needed: float, seeds: int) -> str:
    """What would decide an undecided pair, from its ``seeds_needed``."""
    if seeds < 2:
        return "needs 2 or more seeds per arm to say what would settle it"
    if np.isfinite(needed):
        return f"would need {int(needed)} seeds per arm to settle ({POWER:.0%} power)"
    return "would need more test items to settle"


def _pair(g: pd.DataFrame, a: str, b: str) -> pd.Series:
    """The verdict row of arms ``a`` and ``b``, oriented so that its difference is ``a − b``."""
    row = g[(g["arm_a"] == a) & (g["arm_b"] == b)]
    if len(row):
        return row.iloc[0]
    row = g[(g["arm_a"] == b) & (g["arm_b"] == a)].iloc[0].copy()
    row["diff_pts"], row["diff_lo"], row["diff_hi"] = -row["diff_pts"], -row["diff_hi"], -row["diff_lo"]
    return row


def beats(g: pd.DataFrame) -> dict[str, set[str]]:
    """Per arm of one panel's verdict rows: the arms it is distinguishably better than."""
    out: dict[str, set[str]] = {}
    for _, r in g.iterrows():
        out.setdefault(r["arm_a"], set())
        out.setdefault(r["arm_b"], set())
        if r["verdict"] == f"{r['arm_a']} better":
            out[r["arm_a"]].add(r["arm_b"])
        elif r["verdict"] == f"{r['arm_b']} better":
            out[r["arm_b"]].add(r["arm_a"])
    return out


def sentence(g: pd.DataFrame, gains: dict[str, dict], base: float, order: Sequence[str]) -> str:
    """The answer for one panel: ``g`` its verdict rows (final checkpoint), ``gains`` each arm's gain over the
    base model (``gain_pts``, ``gain_lo``, ``gain_hi``), ``base`` the base model's accuracy (a fraction),
    ``order`` the arms best first."""
    over = f"over the base's {100 * base:.1f}%"
    if len(order) == 1:
        (arm,) = order
        return f"{arm} gained {_gain(gains[arm])} points {over}; one arm alone, nothing to compare it with."
    won = beats(g)
    first = [a for a in order if not any(a in lost for lost in won.values())]
    winners = [a for a in first if won.get(a)]
    if not winners:
        lo, hi = min(order, key=lambda a: gains[a]["gain_pts"]), max(order, key=lambda a: gains[a]["gain_pts"])
        gap = _pair(g, order[0], order[-1])
        seeds = int(min(g["seeds_a"].min(), g["seeds_b"].min()))
        detect = g["detectable_pts"].dropna() if "detectable_pts" in g else pd.Series(dtype=float)
        text = (f"No subset bought distinguishably more than another: gains ran from {_pts(gains[lo]['gain_pts'])} "
                f"({lo}) to {_pts(gains[hi]['gain_pts'])} ({hi}) points {over}; ")
        if len(detect) and np.isfinite(detect.min()):
            text += f"these runs detect differences of {detect.min():.1f} points or more, and "
        return text + (f"the largest gap, {order[0]} − {order[-1]} {_pts(gap['diff_pts'])} "
                       f"{_interval(gap['diff_lo'], gap['diff_hi'])}, {_settle(gap['seeds_needed'], seeds)}.")
    common = [a for a in order if a not in winners and all(a in won[w] for w in winners)]
    loose = [a for a in order if a not in winners and a not in common]
    gain_text = (f"{_gain(gains[winners[0]])} points" if len(winners) == 1 else
                 ", ".join(f"{w} {_gain(gains[w])}" for w in winners) + " points")
    text = f"{_names(winners)} bought the most ({gain_text} {over})"
    if common:
        closest = min(((w, a) for w in winners for a in common), key=lambda p: _pair(g, *p)["diff_pts"])
        d = _pair(g, *closest)
        whom = "every other arm" if not loose else _names(common)
        text += (f", distinguishably above {whom} (the closest, {closest[0]} − {closest[1]}, by "
                 f"{_pts(d['diff_pts'])} {_interval(d['diff_lo'], d['diff_hi'])})")
    else:  # the winners beat different arms
        text += ", " + "; ".join(f"{w} distinguishably above {_names(sorted(won[w], key=order.index))}"
                                 for w in winners)
    if loose:
        text += f"; nothing separates {_names(loose)} from {'it' if len(winners) == 1 else 'them'}"
    return text + "."


def answer_sentences(verdicts: pd.DataFrame, gains: pd.DataFrame) -> list[str]:
    """One sentence per model × dataset × budget (× variant) trained and tested on the same dataset, headed by the
    panel's name: from the verdict table and the per-arm gains table (``gains_over_seeds``'s columns)."""
    own = verdicts[~verdicts["ood"].astype(bool)] if len(verdicts) else verdicts
    own_gains = gains[~gains["ood"].astype(bool)] if len(gains) else gains
    by = ["model", "dataset", "evalset", "budget"] + (["variant"] if "variant" in own_gains else [])
    lines = []
    for key, gg in (own_gains.groupby(by, sort=False) if len(own_gains) else []):
        g = own
        for k, v in zip(by, key):
            g = g[g[k] == v] if len(g) else g
        arms = {r["policy"]: r for _, r in gg.iterrows()}
        if len(arms) > 1 and not len(g):
            continue  # no verdicts for these arms (their tables were built from other files)
        won = beats(g) if len(g) else {}
        losses = {a: sum(a in lost for lost in won.values()) for a in arms}
        order = sorted(arms, key=lambda a: (losses[a], -arms[a]["final_acc"]))
        model, dataset, _, budget = key[:4]
        head = f"**{model} · {dataset} · budget {budget}" + (f" · {key[4]}" if len(key) > 4 else "") + ":** "
        lines.append(head + sentence(g, arms, float(gg["base_acc"].iloc[0]), order))
    return lines


def overlap_note(shares: pd.DataFrame, at_least: float = 0.5) -> str:
    """One sentence naming the pairs of arms whose subsets share at least ``at_least`` of their items
    (``shares``: model, dataset, budget, arm_a, arm_b, shared, size, share), since a verdict between them
    then says little; empty when no pair does."""
    heavy = shares[shares["share"] >= at_least] if len(shares) else shares
    if not len(heavy):
        return ""
    parts = [f"{r['arm_a']} and {r['arm_b']} bought {r['shared']:g} of the same {r['size']:g} items "
             f"({r['share']:.0%})" + (f" on {r['model']} · {r['dataset']} · budget {r['budget']}"
                                      if shares[["model", "dataset", "budget"]].drop_duplicates().shape[0] > 1 else "")
             for _, r in heavy.iterrows()]
    return "Overlap: " + "; ".join(parts) + ", so a verdict between them says little."


def subset_overlap(subsets: dict[tuple, list[set]]) -> pd.DataFrame:
    """Per (model, dataset, budget) and pair of policies, from each policy's subsets (one set of ids per seed, in
    seed order): the items the pair shares, mean over the seeds both have, and that as a share of the smaller
    subset."""
    rows = []
    for (model, dataset, budget), by_policy in subsets.items():
        names = list(by_policy)
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                pairs = list(zip(by_policy[a], by_policy[b]))
                shared = float(np.mean([len(x & y) for x, y in pairs]))
                size = float(np.mean([min(len(x), len(y)) for x, y in pairs]))
                rows.append({"model": model, "dataset": dataset, "budget": budget, "arm_a": a, "arm_b": b,
                             "shared": round(shared, 1), "size": round(size, 1),
                             "share": shared / size if size else math.nan})
    return pd.DataFrame(rows, columns=["model", "dataset", "budget", "arm_a", "arm_b", "shared", "size", "share"])


def landing_rst(lead: Sequence[str], gains: pd.DataFrame, level: float) -> str:
    """The HTML report's landing page (reStructuredText): the answer, then each in-distribution panel's gains per
    arm as a table, then where the rest is."""
    lines = ["The answer", "==========", ""]
    for p in lead:
        lines += [p.replace("`", "``"), ""]
    own = gains[~gains["ood"].astype(bool)] if len(gains) else gains
    by = ["model", "dataset", "budget"] + (["variant"] if "variant" in own else [])
    for key, g in (own.groupby(by, sort=False) if len(own) else []):
        title = " · ".join(map(str, key[:2])) + f" · budget {key[2]}" + (f" · {key[3]}" if len(key) > 3 else "")
        lines += [f".. list-table:: {title}: gain over the base model ({100 * g['base_acc'].iloc[0]:.1f}%)",
                  "   :header-rows: 1", "", "   * - arm", "     - seeds", "     - final %",
                  f"     - gain (points), {level:.0%} interval"]
        for _, r in g.iterrows():
            lines += [f"   * - {r['policy']}", f"     - {r['n_seeds']}", f"     - {100 * r['final_acc']:.1f}",
                      f"     - {_gain(r)}"]
        lines.append("")
    lines += ["Menu: **1. The answer** holds the gains (summary.html) and every pair of arms with its interval "
              "(verdicts.html); **2. Tables** and **3. Figures** hold the rest; **4. Data** the per-seed CSV files.",
              ""]
    return "\n".join(lines)


def closing_lines(summary_md: str, summary_html: str, configfiles: Sequence[str] = ()) -> list[str]:
    """What the console shows when a run finishes: the answer from ``summary_md`` and where the summary and the
    report are; nothing where the run has not built the summary."""
    if not os.path.exists(summary_md):
        return []
    lead = [p.replace("**", "").replace("`", "") for p in read_answer(summary_md)]
    where = os.path.dirname(summary_md) or "."
    config = "".join(f" --configfile {c}" for c in configfiles)
    return (["", f"The answer ({summary_md}):"] + [f"  {p}" for p in lead]
            + [f"Summary: {summary_md} (as a page: {summary_html}); tables: {where}/tables/, figures: {where}/figures/.",
               f"Every table and figure in one page: snakemake{config} --report {where}/report.html"])

"""The drift table (``analysis.drift``): per arm, how its items moved between all-fail, mixed and all-solved from
the pool's scoring to the same subset scored again by the trained model (:mod:`grpo_budget.aggregate.drift`,
:mod:`grpo_budget.score.drift`), beside the learnable share its train log holds."""

from __future__ import annotations

import numpy as np
import pandas as pd

from grpo_budget.aggregate import drift
from grpo_budget.aggregate.outputs import output
from grpo_budget.aggregate.read import ARM, KEYS, finish, keys_in, read_table, sort_arms
from grpo_budget.aggregate.render import formatted, groups_of, with_variant, write_outputs
from grpo_budget.config.settings import Analysis
from grpo_budget.experiment.plan import Listing
from grpo_budget.learnability import learnable_from_log, window_steps

LEARNABLE = ("learnable_first_pct", "learnable_last_pct", "learnable_all_pct")


def learnable_shares(log: pd.DataFrame, window: float | int) -> dict[str, float]:
    """A train log's learnable share (groups whose rewards are not all equal), in percent: over its first and its
    last ``window_steps`` logged steps and over all of them (NaN without ``frac_reward_zero_std``)."""
    learn = learnable_from_log(log)["learnable"] if "frac_reward_zero_std" in log else pd.Series(dtype=float)
    n = window_steps(len(learn), window)
    mean = (lambda x: 100 * float(x.mean())) if n else (lambda x: np.nan)
    return {"logged_steps": len(learn), "window_steps": n, "learnable_first_pct": mean(learn.iloc[:n]),
            "learnable_last_pct": mean(learn.iloc[len(learn) - n:]), "learnable_all_pct": mean(learn)}


def drift_row(after: pd.DataFrame) -> dict:
    """One drift file's transition counts (:data:`drift.TRANSITIONS`) and shares: its ``*_before`` columns are
    the pool's scoring of the same items."""
    before = after[["id", "n_samples_before", "n_correct_before"]].rename(
        columns={"n_samples_before": "n_samples", "n_correct_before": "n_correct"})
    row = drift.flat(drift.transitions(before, after))
    return {"items": len(after), **row, **drift.shares(row)}


def drift_table(runs: Listing, s: Analysis) -> pd.DataFrame:
    """Per run with a drift file: its transitions, the scored checkpoint's step, whether the draws were the
    scoring's own (``paired``), and its learnable shares (:func:`learnable_shares`)."""
    rows = []
    for r in runs.runs:
        if not r.drift:
            continue
        after = read_table(r.drift)
        rows.append({**{k: getattr(r, k) for k in KEYS}, "step": int(after["step"].max()) if len(after) else 0,
                     "paired": bool(after["paired"].all()), **drift_row(after),
                     **learnable_shares(read_table(r.log), s.learnable_window)})
    return finish(sort_arms(pd.DataFrame(rows), ["seed"]).reset_index(drop=True), runs) if rows else pd.DataFrame()


def _arrow(a: str, b: str) -> str:
    return f"{drift.OUTCOME_NAMES[a]} → {drift.OUTCOME_NAMES[b]}"


@output("drift", "table", reads={"drift", "logs"}, when="drift")
def write_drift(runs: Listing, outs: list[str], s: Analysis) -> None:
    table = drift_table(runs, s)
    sections = []
    for key, g in groups_of(table, ["model", "dataset"]):
        arms = g.groupby(keys_in(g, ARM[2:]), sort=False)
        g = arms.agg(seeds=("seed", "size"), items=("items", "sum"), step=("step", "max"), paired=("paired", "all"),
                     **{c: (c, "sum") for c in drift.TRANSITIONS}, **{c: (c, "mean") for c in LEARNABLE},
                     window=("window_steps", "first")).reset_index()
        shares = pd.DataFrame([drift.shares(row) for row in g[drift.TRANSITIONS].to_dict("records")])
        disp = pd.DataFrame({"policy": g["policy"], "budget": g["budget"], "seeds": g["seeds"], "items": g["items"],
                             **{_arrow(*c.split("_to_")): g[c] for c in drift.TRANSITIONS},
                             "mixed before %": (100 * shares["mixed_before"]).map(lambda x: formatted(x, ".1f")),
                             "mixed after %": (100 * shares["mixed_after"]).map(lambda x: formatted(x, ".1f")),
                             "all-fail moved %": (100 * shares["fail_moved"]).map(lambda x: formatted(x, ".1f")),
                             "mixed → all-solved %": (100 * shares["mixed_solved"]).map(lambda x: formatted(x, ".1f")),
                             "learnable, first steps %": g["learnable_first_pct"].map(lambda x: formatted(x, ".1f")),
                             "learnable, last steps %": g["learnable_last_pct"].map(lambda x: formatted(x, ".1f")),
                             "learnable, all steps %": g["learnable_all_pct"].map(lambda x: formatted(x, ".1f"))})
        notes = [f"Scored again at step {int(g['step'].max())} (the final adapter); the learnable shares over the "
                 f"first and last {int(g['window'].max())} logged step(s) (analysis.learnable_window) and all of them."]
        if not g["paired"].all():
            notes.append("Not paired: the score table's adaptive rounds did not replay with this scoring code, so "
                         "its items drew their counts at the scoring seed; a move may then be sampling luck.")
        sections.append((f"{key[0]} · {key[1]}", with_variant(disp, g), notes))
    note = ("Each arm's subset, scored by the base model when the pool was scored and again by the trained model "
            "(its final adapter) with as many samples per item and the same random draws, so an unchanged model "
            "keeps every outcome. An item is all-fail (no sample correct), mixed, or all-solved; only a mixed item "
            "gives a GRPO group a gradient. All-fail → mixed: a hard item that became learnable; mixed → all-solved: "
            "one used up. Counts are summed over the arm's seeds; the learnable shares (1 − frac_reward_zero_std of "
            "the train logs) are their mean. Per-seed rows: the CSV.")
    write_outputs(outs, table, "Drift: how training moved each arm's items", note, sections)

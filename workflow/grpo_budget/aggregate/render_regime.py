"""The regime map's further tables as files: the prediction made before training, tested leaving one base model
out (:mod:`grpo_budget.aggregate.prediction`)."""

from __future__ import annotations

import pandas as pd

from grpo_budget.aggregate.outputs import output
from grpo_budget.aggregate.prediction import BASELINES, PREDICTORS, PRIMARY, beats_baselines, leave_one_out, validation
from grpo_budget.aggregate.regime import map_arms
from grpo_budget.aggregate.render import formatted, write_outputs
from grpo_budget.experiment.plan import Listing
from grpo_budget.config.settings import Analysis


def _rate(hits: float, n: int) -> str:
    return f"{hits:g}/{n} ({hits / n:.0%})" if n else "–"


@output("prediction", "table", reads={"evals", "scores", "subsets"}, when="models")
def write_prediction(runs: Listing, outs: list[str], s: Analysis) -> None:
    folds = leave_one_out(map_arms(runs, s))
    summary = validation(folds) if len(folds) else pd.DataFrame()
    sections = []
    if len(summary):
        sections.append(("Leave one base model out, per predictor", pd.DataFrame({
            "predictor": summary["predictor"], "how it ranks the arms": summary["predictor"].map(
                lambda n: PREDICTORS[n].doc), "held out": summary["bases"],
            "names a tied-first arm": [_rate(h, n) for h, n in zip(summary["hits"], summary["bases"])],
            "where some pair is decided": [_rate(h, n) for h, n in zip(
                (summary["hit_rate_decided"] * summary["decided"]).fillna(0), summary["decided"])],
            "mean Spearman": summary["spearman"].map(lambda x: formatted(x, "+.2f")),
            "blind pick": summary["chance"].map(lambda x: f"{x:.0%}")}), []))
        shown = folds[folds["predictor"].isin([PRIMARY, *BASELINES, "others_mean"])]
        sections.append(("Each held-out base model", pd.DataFrame({
            "held out": shown["base"], "predictor": shown["predictor"], "fitted on the others": shown["param"],
            "predicted": shown["predicted"], "observed (by gain)": shown["observed"],
            "tied first": shown["first"], "hit": shown["hit"].map(lambda x: f"{x:g}"),
            "Spearman": shown["spearman"].map(lambda x: formatted(x, "+.2f"))}), []))
    ok, why = beats_baselines(summary) if len(summary) else (False, "no regime map")
    lead = [f"**{'The prediction beats both baselines' if ok else 'No recommendation yet'}** "
            f"(predictor `{PRIMARY}`): {why}."]
    note = ("Each base model of the regime map held out in turn: every predictor ranks its arms from the scores alone "
            "(the subsets' features before training; a predictor with a parameter fits it on the other base models), "
            "and the ranking is compared with the gains it got. A hit: the predicted top arm is tied first (no arm "
            "beats it distinguishably; a tie at the top counts by the share of its arms tied first); a blind pick "
            "hits as often as the share of arms tied first. `grpo-budget recommend` uses "
            f"`{PRIMARY}` only when it beats {' and '.join(BASELINES)} on three or more held-out base models.")
    write_outputs(outs, folds, "The prediction before training, tested leaving one base model out", note, sections,
                   lead=lead)

"""``grpo-budget recommend``: one model's arms ranked before any training, from its score table, by the prediction
named in advance (:data:`grpo_budget.aggregate.prediction.PRIMARY`), with its leave-one-base-model-out validation
beside the ranking; or, where the validation does not show it beating the plain baselines, why it cannot
recommend yet, with the numbers."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from grpo_budget.aggregate.prediction import (
    BASELINES,
    PREDICTORS,
    PRIMARY,
    beats_baselines,
    ranking,
    subset_features,
    validation,
)
from grpo_budget.errors import UserError
from grpo_budget.experiment import plan
from grpo_budget.experiment.config import load
from grpo_budget.io import read_parquet
from grpo_budget.select.policies import select

# The validation measured on configs/regime-map-cpu.yaml (its tables/prediction.csv; docs/results.md says where and
# when): what a config without a regime map of its own is told.
SHIPPED = Path(__file__).resolve().with_name("validation") / "regime-map-cpu.csv"
SCORE_COLUMNS = ["id", "n_correct", "n_samples", "pass_rate", "pass_rate_eb", "eb_prior_a", "eb_prior_b"]


def arm_features(scores: pd.DataFrame, config: dict, dataset: str, budget: str) -> pd.DataFrame:
    """Each configured arm's subset features (:func:`grpo_budget.aggregate.prediction.subset_features`), the mean
    over the config's seeds, as its select jobs would buy from ``scores``; ``pool_mean`` the pool's."""
    G = config["training"]["num_generations"]
    ds = config["datasets"][dataset]
    pool_mean = float(scores["pass_rate_eb"].mean()) if "pass_rate_eb" in scores else float("nan")
    rows = []
    for arm in config["policies"]:
        labels = plan.budget_labels(config, arm)
        label = budget if budget in labels else labels[0]
        subsets = [select(scores, arm, plan.parse_budget(label), seed, ds.get("tiers"), config["budget_rounding"],
                          G, config["scoring"]["difficulty"]) for seed in config["seeds"]]
        f = pd.DataFrame([subset_features(s, G) for s in subsets]).mean()
        rows.append({"policy": arm, **f.to_dict(), "pool_mean": pool_mean})
    return pd.DataFrame(rows)


def validation_folds(config: dict, path: str | None = None) -> tuple[pd.DataFrame, str]:
    """The leave-one-out folds a recommendation stands on, and where they came from: ``path`` (a regime map's
    ``tables/prediction.csv``), else the config's own map where it has one, else the one this project measured."""
    own = Path(plan.paths(config["results"]).table.format(name="prediction"))
    source = Path(path) if path else own if own.exists() else SHIPPED
    if not source.exists():
        raise UserError(f"{source}: no such validation file (a regime map's tables/prediction.csv)")
    folds = pd.read_csv(source)
    missing = {"base", "predictor", "hit", "spearman", "chance", "decided"} - set(folds.columns)
    if missing:
        raise UserError(f"{source}: not a regime map's prediction table (no column {sorted(missing)[0]!r})")
    return folds, str(source)


def recommend(config: dict, model: str, validation_path: str | None = None) -> tuple[bool, list[str]]:
    """Whether it recommends, and the lines to print: per trainable dataset and budget, the arms ranked by
    :data:`PRIMARY` with the validation's numbers; or why not."""
    if model not in config["models"]:
        raise UserError(f"--model {model!r} is not a model of the config; allowed: {', '.join(config['models'])}")
    folds, source = validation_folds(config, validation_path)
    summary = validation(folds)
    ok, why = beats_baselines(summary)
    if not ok:
        return False, [f"grpo-budget recommend: cannot recommend yet: the prediction before training "
                       f"({PRIMARY}: {PREDICTORS[PRIMARY].doc}), tested leaving one base model out ({source}), "
                       f"{why}. Train the arms (snakemake) to know."]
    me = summary.set_index("predictor")
    lines = [f"Validation ({source}, {int(me.loc[PRIMARY, 'bases'])} base models held out in turn): {why}."]
    p = plan.paths(config["results"])
    for dataset in plan.trainable_datasets(config):
        path = p.scores.format(model=model, dataset=dataset)
        if not Path(path).exists():
            raise UserError(f"{path}: no score table; run `snakemake {path}` first (the score job), then recommend")
        scores = read_parquet(path, None)
        scores = scores[[c for c in scores.columns if c not in ("samples", "answers", "correct", "format_ok")]]
        for budget in dict.fromkeys(b for arm in config["policies"] for b in plan.budget_labels(config, arm)):
            f = arm_features(scores, config, dataset, budget)
            ranked = ranking(f["policy"], PREDICTORS[PRIMARY].score(f, None))
            by = f.set_index("policy")
            cells = [" = ".join(f"{a} ({100 * by.loc[a, 'learnable']:.1f}%)" for a in tier) for tier in ranked]
            lines.append(f"{model} · {dataset} · budget {budget}: " + " > ".join(cells)
                         + f" (predicted share of mixed GRPO groups at G = {config['training']['num_generations']})")
    lines.append(f"Baselines: {', '.join(BASELINES)}; a predicted top arm was tied first on "
                 f"{me.loc[PRIMARY, 'hit_rate']:.0%} of the held-out base models (a blind pick: "
                 f"{me.loc[PRIMARY, 'chance']:.0%}).")
    return True, lines


def main(argv: Sequence[str] | None = None) -> int:
    """``grpo-budget recommend``: the ranking, or why it cannot recommend yet (exit 1)."""
    p = argparse.ArgumentParser(prog="grpo-budget recommend", description=__doc__.splitlines()[0])
    p.add_argument("--configfile", default="config.yaml", help="the experiment config (default: the embedded one)")
    p.add_argument("--model", required=True, help="a model of the config whose pool is scored")
    p.add_argument("--validation", metavar="CSV", help="a regime map's tables/prediction.csv (default: the config's)")
    a = p.parse_args(argv)
    ok, lines = recommend(load(a.configfile), a.model, a.validation)
    print("\n".join(lines))
    if not ok:
        raise SystemExit(1)
    return 0

"""``grpo-budget pilot``: before the grid, does the pool give GRPO a signal?

GRPO learns only from groups whose G completions get different rewards. The pilot samples G =
``training.num_generations`` completions for a few dozen pool items (seeded by ``scoring.seed``) with the base
model, as scoring does (same prompts, sampling settings and grader), and reports the share of items with mixed
outcomes (some right, some wrong), the expected share of learnable groups over those items and the share of
answers the grader could not read. Below :data:`NO_SIGNAL` of items mixed it says that the comparison will learn
nothing and what to change; the command then exits 1.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from grpo_budget.aggregate.signal import CHANGE, NOTHING
from grpo_budget.cluster.jobs import generation_job
from grpo_budget.errors import UserError
from grpo_budget.experiment import plan
from grpo_budget.experiment.config import load
from grpo_budget.generation.backends import from_settings
from grpo_budget.generation.sample import sample_and_grade
from grpo_budget.generation.sampling import Sampling
from grpo_budget.io import read_parquet
from grpo_budget.prepare.splits import build, missing_answer

NO_SIGNAL = 0.05  # fewer items than this share with mixed outcomes: nothing to learn from


@dataclass(frozen=True)
class Pilot:
    model: str
    dataset: str
    items: int
    group: int  # G
    mixed: int  # items with some samples right and some wrong
    solved: int  # items every sample got right
    unsolved: int  # items no sample got right
    pass_rate: float  # mean over the items
    learnable: float  # expected share of learnable groups, mean of 1 - p^G - (1 - p)^G at the items' pass rates
    unreadable: float  # share of samples the grader could read no answer from
    configfile: str = "CONFIG"

    @property
    def share(self) -> float:
        return self.mixed / self.items if self.items else 0.0

    def lines(self) -> list[str]:
        out = [f"pilot {self.model} · {self.dataset}: {self.items} pool items × {self.group} samples "
               "(training.num_generations) from the base model",
               f"  mean pass rate {self.pass_rate:.1%}; items no sample solved {self.unsolved}, every sample solved "
               f"{self.solved}, mixed {self.mixed} ({self.share:.1%}); expected learnable groups {self.learnable:.1%}",
               f"  answers the grader could not read: {self.unreadable:.0%} of samples"]
        if self.share >= NO_SIGNAL:
            out.append(f"  signal: {self.mixed} of {self.items} items had mixed outcomes at G = {self.group}: GRPO "
                       "has groups to learn from")
            return out
        if self.solved == self.items:
            why, what = "the base model solves every item", "use harder items (or a filter: to them)"
        elif self.unreadable > 0.5:
            why, what = ("the grader could read no answer from most samples", "make the answers readable: "
                         "prompt.instruction or prompt.template, grading.mode or grading.pattern (`grpo-budget "
                         f"check-grader --configfile {self.configfile} --dataset {self.dataset}` checks the grader on your gold "
                         f"answers); else {CHANGE}")
        else:
            why, what = "the base model solves almost none of the items", CHANGE
        out.append(f"  NO SIGNAL: {self.mixed} of {self.items} items ({self.share:.1%}) had mixed outcomes at G = "
                   f"{self.group} ({why}), so GRPO's groups would get equal rewards: {NOTHING}; {what}")
        return out


def summarize(model: str, dataset: str, graded: pd.DataFrame, group: int, configfile: str = "CONFIG") -> Pilot:
    """The pilot's counts from ``graded`` (:func:`grpo_budget.generation.sample.sample_and_grade`'s rows)."""
    k, n = graded["n_correct"].to_numpy(float), graded["n_samples"].to_numpy(float)
    p = np.divide(k, n, out=np.zeros_like(k), where=n > 0)
    samples = max(1.0, float(n.sum()))
    return Pilot(model, dataset, len(graded), group, int(((k > 0) & (k < n)).sum()), int(((k == n) & (n > 0)).sum()),
                 int((k == 0).sum()), float(p.mean()) if len(p) else 0.0,
                 float(np.mean(1 - p ** group - (1 - p) ** group)) if len(p) else 0.0,
                 float(graded["n_format_fail"].sum()) / samples, configfile)


def pool_items(config: dict, dataset: str, n: int, seed: int) -> pd.DataFrame:
    """``n`` of a dataset's pool items, seeded: from its prepared table where the workflow made it, else prepared
    here as the prepare job does."""
    path = Path(plan.paths(config["results"]).data.format(dataset=dataset, split="pool"))
    pool = read_parquet(path) if path.exists() else build(config["datasets"][dataset])["pool"]
    if pool["answer"].map(missing_answer).all():
        raise UserError(f"dataset {dataset}: the pool is unlabeled (answers:), so the pilot cannot tell right from "
                        "wrong; run it on a labeled copy of the pool")
    keep = np.sort(np.random.default_rng(seed).choice(len(pool), size=min(n, len(pool)), replace=False))
    return pool.iloc[keep].reset_index(drop=True)


def run(config: dict, configfile: str, models: list[str] | None = None, datasets: list[str] | None = None,
        items: int = 32) -> list[Pilot]:
    """The pilot of each trained model on each trainable dataset (or those named)."""
    models = models or plan.trained_models(config)
    datasets = datasets or plan.trainable_datasets(config)
    for name, known in (("--model", config["models"]), ("--dataset", config["datasets"])):
        for x in models if name == "--model" else datasets:
            if x not in known:
                raise UserError(f"{name} {x}: {configfile} has no such entry; allowed: {', '.join(known)}")
    group = int(config["training"]["num_generations"])
    out = []
    for model in models:
        path = plan.model_path(config, model)
        if {"bootstrap", "gguf"} & set(config["models"][model]) and not Path(path).is_dir():
            raise UserError(f"model {model} is made by the workflow ({path} does not exist yet): make it first with "
                            f"`snakemake --configfile {configfile} {path}`")
        g = generation_job(config, "score", model).generation
        gen = from_settings(path, g)
        for dataset in datasets:
            pool = pool_items(config, dataset, items, g.seed)
            graded = sample_and_grade(gen, pool, config["datasets"][dataset], replace(Sampling.of(g), n=group))
            out.append(summarize(model, dataset, graded, group, configfile))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """``grpo-budget pilot``: 1 where some model and dataset give GRPO no signal."""
    p = argparse.ArgumentParser(prog="grpo-budget pilot", description=__doc__.splitlines()[0])
    p.add_argument("--configfile", default="config.yaml", help="the experiment config (default: the embedded one)")
    p.add_argument("--model", action="append", help="a model of the config (repeatable; default: every trained one)")
    p.add_argument("--dataset", action="append", help="a dataset of the config (repeatable; default: every trainable)")
    p.add_argument("--items", type=int, default=32, help="pool items sampled (default 32), seeded by scoring.seed")
    a = p.parse_args(argv)
    found = run(load(a.configfile), a.configfile, a.model, a.dataset, a.items)
    print("\n".join(line for one in found for line in one.lines()))
    return 1 if any(one.share < NO_SIGNAL for one in found) else 0

"""Sample completions for a table of items and grade them: difficulty scoring of the pool (pass rate over K
samples) and, with the same function, evaluation of a model on a test set."""

from __future__ import annotations

import numpy as np
import pandas as pd

from . import config, grading, prompts, stats
from .errors import UserError
from .generation import Generator, Sampling, from_settings
from .io import read_parquet, write_parquet
from .settings import Generation

GRADED_COLUMNS = ["id", "samples", "correct", "format_ok", "n_samples", "n_correct", "pass_rate",
                  "n_format_fail", "mean_completion_tokens", "n_truncated"]


def sample_and_grade(gen: Generator, items: pd.DataFrame, dataset: dict, sampling: Sampling,
                     adapter: str | None = None) -> pd.DataFrame:
    """One row per item: its samples, which were correct, pass rate, format failures and completion length."""
    built = prompts.for_dataset(dataset, list(items["prompt"]), gen.tokenizer)
    outputs = gen.generate(built, sampling, adapter=adapter, keys=[str(i) for i in items["id"]])
    g = config.fill(("datasets", "*", "grading"), dataset.get("grading", {}))
    rows = []
    for item_id, gold, kind, comps in zip(items["id"], items["answer"], items["answer_type"], outputs):
        grades = grading.grade_many([c.text for c in comps], [str(gold)] * len(comps), kind,
                                    g["mode"], g["pattern"])
        correct = [gr.correct for gr in grades]
        rows.append(
            {
                "id": item_id,
                "samples": [c.text for c in comps],
                "correct": correct,
                "format_ok": [gr.format_ok for gr in grades],
                "n_samples": len(comps),
                "n_correct": int(sum(correct)),
                "pass_rate": float(np.mean(correct)) if comps else float("nan"),
                "n_format_fail": int(sum(not gr.format_ok for gr in grades)),
                "mean_completion_tokens": float(np.mean([c.n_tokens for c in comps])) if comps else float("nan"),
                "n_truncated": int(sum(not c.finished for c in comps)),
            }
        )
    return pd.DataFrame(rows, columns=GRADED_COLUMNS)


def score(model: str, pool_path: str, out_path: str, settings: dict | Generation, dataset: dict) -> pd.DataFrame:
    """Difficulty of every pool item: the base model's pass rate over ``num_samples`` samples."""
    g = settings if isinstance(settings, Generation) else Generation.from_dict(settings, "scoring")
    pool = read_parquet(pool_path)
    if pool.empty:
        raise UserError(f"{pool_path}: the pool has no items; check the dataset's filter, splits and sizes")
    gen = from_settings(model, g)
    graded = sample_and_grade(gen, pool, dataset, Sampling.of(g))
    meta = pool.drop(columns=[c for c in GRADED_COLUMNS + EB_COLUMNS if c != "id" and c in pool.columns])
    out = meta.merge(with_posterior(graded), on="id", how="left", validate="one_to_one")
    write_parquet(out, out_path)
    return out


EB_COLUMNS = ["pass_rate_eb", "pass_rate_eb_lo", "pass_rate_eb_hi", "eb_prior_a", "eb_prior_b"]


def with_posterior(graded: pd.DataFrame, level: float = 0.95) -> pd.DataFrame:
    """The empirical-Bayes pass rate of each item beside its k/K: the posterior mean and ``level`` interval under a
    Beta prior fitted to the whole pool's counts (``eb_prior_a``, ``eb_prior_b``). It shrinks the ties at 0/K and
    K/K toward the pool, by as much as the pool says such items differ."""
    a, b = stats.fit_beta_prior(graded["n_correct"], graded["n_samples"])
    post = stats.beta_posterior(graded["n_correct"].to_numpy(), graded["n_samples"].to_numpy(), a, b, level)
    return graded.assign(pass_rate_eb=post["mean"].to_numpy(), pass_rate_eb_lo=post["lo"].to_numpy(),
                         pass_rate_eb_hi=post["hi"].to_numpy(), eb_prior_a=a, eb_prior_b=b)


def verify(model: str, subset_paths: list[str], out_path: str, settings: dict | Generation, dataset: dict
           ) -> pd.DataFrame:
    """Fresh pass rates of every item any subset selected (each item once): ``id, n_samples, n_correct,
    pass_rate``. Selection by a noisy pass rate favours items whose estimate erred towards the cut; new samples
    do not share that error."""
    g = settings if isinstance(settings, Generation) else Generation.from_dict(settings, "scoring")
    items = pd.concat([read_parquet(p, ["id", "prompt", "answer", "answer_type"]) for p in subset_paths])
    items = items.drop_duplicates("id").reset_index(drop=True)
    graded = sample_and_grade(from_settings(model, g), items, dataset, Sampling.of(g))
    out = graded[["id", "n_samples", "n_correct", "pass_rate"]]
    write_parquet(out, out_path)
    return out

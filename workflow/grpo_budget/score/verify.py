"""Fresh samples of every selected item: pass rates free of the selection's winner's curse."""

from __future__ import annotations

import pandas as pd

from grpo_budget.config.settings import Generation
from grpo_budget.generation.backends import from_settings
from grpo_budget.generation.sampling import Sampling
from grpo_budget.generation.sample import sample_and_grade
from grpo_budget.io import read_parquet, write_parquet
from grpo_budget.prepare.splits import attach_answers


def verify(model: str, subset_paths: list[str], out_path: str, g: Generation, dataset: dict) -> pd.DataFrame:
    """Fresh pass rates of every item any subset selected (each item once): ``id, n_samples, n_correct,
    pass_rate``. Selection by a noisy pass rate favours items whose estimate erred towards the cut; new samples
    do not share that error."""
    items = pd.concat([read_parquet(p, ["id", "prompt", "answer", "answer_type"]) for p in subset_paths])
    items = attach_answers(items.drop_duplicates("id").reset_index(drop=True), dataset, ", ".join(subset_paths))
    graded = sample_and_grade(from_settings(model, g), items, dataset, Sampling.of(g))
    out = graded[["id", "n_samples", "n_correct", "pass_rate"]]
    write_parquet(out, out_path)
    return out

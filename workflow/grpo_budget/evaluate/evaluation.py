"""Evaluate the base model (step 0) or every checkpoint of a trained arm on one test set."""

from __future__ import annotations

import pandas as pd

from grpo_budget.config.settings import Generation
from grpo_budget.generation.backends import from_settings
from grpo_budget.generation.sampling import Sampling
from grpo_budget.generation.sample import sample_and_grade
from grpo_budget.io import read_json, read_parquet, write_parquet
from grpo_budget.train.checkpoints import verify_listed


def evaluate(model: str, test_path: str, out_path: str, g: Generation, dataset: dict,
             manifest_path: str | None = None, final_only: bool = False) -> pd.DataFrame:
    """Per item and checkpoint: samples, correct, accuracy (= pass rate over ``num_samples``).

    Without a manifest the base model is evaluated as step 0; with one, each listed checkpoint's adapter, once its
    weights match the sha256 the manifest recorded (see :func:`grpo_budget.train.checkpoints.verify_listed`).
    The sampling seed is the same at every checkpoint, so differences come from the weights.
    """
    test = read_parquet(test_path)
    targets = [(0, None)]
    if manifest_path:
        listed = read_json(manifest_path)["checkpoints"]
        if final_only:
            listed = listed[-1:]
        targets = [(step, str(path)) for step, path in verify_listed(manifest_path, listed)]
    gen = from_settings(model, g, adapters=manifest_path is not None)
    sampling = Sampling.of(g)
    frames = []
    for step, adapter in targets:
        graded = sample_and_grade(gen, test, dataset, sampling, adapter=adapter)
        graded.insert(1, "step", step)
        frames.append(graded)
    out = pd.concat(frames, ignore_index=True).rename(columns={"pass_rate": "accuracy"})
    write_parquet(out, out_path)
    return out

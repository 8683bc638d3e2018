"""The fingerprint of a training trajectory: what must match for a run to resume another run's checkpoints."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict

import pandas as pd

from grpo_budget.config import records
from grpo_budget.config.settings import Training
from grpo_budget.digest import model_digest
from grpo_budget.train.methods import method_of


def trajectory_settings(t: Training) -> dict:
    """The training settings that shape the run up to any given step: all but ``save_steps`` and
    ``checkpoints`` (when to save changes no update) and the run's length, ``max_steps`` or ``epochs``
    (extending a run, as a SLURM requeue or a raised max_steps does, must resume) -- except that the length stays
    in when the learning-rate schedule depends on it (decay, or a warmup given as a ratio of max_steps). With
    ``epochs`` set, ``max_steps`` is ignored, so never counts; unset ``epochs`` is left out, which keeps the
    fingerprints of runs made before the field existed. The method's own settings count, by name; fields added
    since the first fingerprints count only where they change what runs did before them
    (:data:`grpo_budget.config.records.FINGERPRINT`)."""
    s = asdict(t)
    del s["method_settings"]
    s.update(method_of(t).own(t))
    # HF's "constant" schedule ignores warmup; "constant_with_warmup" with no warmup is the same schedule.
    schedule, no_warmup = t.lr_scheduler_type, float(t.warmup_ratio) == 0
    ignores_max_steps = schedule == "constant" or (schedule == "constant_with_warmup" and no_warmup)
    dropped = {"save_steps", "checkpoints", "max_steps", "epochs"}
    if not ignores_max_steps:
        dropped -= {"epochs"} if t.epochs is not None else {"max_steps"}
    # Memory knobs change how a step is computed, not what it computes: lowering them after an out-of-memory
    # failure must resume, not retrain.
    dropped |= {"gradient_checkpointing", "vllm_gpu_memory_utilization", "vllm_max_model_length"}
    # Where a run trains changes rounding, not the experiment: a run moved between machines resumes.
    dropped |= {"device"}
    # Where the steps are also logged (TensorBoard, W&B) changes nothing they compute.
    dropped |= {"report_to"}
    # Left out before the dropped fields go: whether vLLM is used depends on the device.
    return {k: v for k, v in records.left_out(s, records.FINGERPRINT).items() if k not in dropped}


# The parts of a dataset entry that shape training beyond the subset's rows: the prompt and the reward.
DATASET_FINGERPRINT = ("source", "benchmark", "generator", "prompt", "grading")


def subset_digest(subset: pd.DataFrame) -> dict:
    """Hash of the subset's content, not its file: a re-write with the same rows keeps it. Row order counts, since
    TRL's sampler permutes row indices, so reordered rows train a different trajectory."""
    rows = [[str(p), str(a), str(t)] for p, a, t in zip(subset["prompt"], subset["answer"], subset["answer_type"])]
    return {"items": len(rows), "sha256": hashlib.sha256(json.dumps(rows).encode()).hexdigest()}


def fingerprint(subset: pd.DataFrame, model_path: str, t: Training, dataset: dict, seed: int) -> dict:
    """``{"fingerprint": hash, "parts": {...}}`` of everything that determines the training trajectory: subset
    content, model, trajectory settings, the dataset's prompt and grading (they shape the reward) and the seed."""
    parts = {
        "subset": subset_digest(subset),
        "model": model_digest(model_path),
        "training": trajectory_settings(t),
        "dataset": {k: dataset[k] for k in DATASET_FINGERPRINT if k in dataset},
        "seed": seed,
    }
    parts = json.loads(json.dumps(parts, sort_keys=True, default=str))  # compare as read back from JSON
    digest = hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]
    return {"fingerprint": digest, "parts": parts}


def differing_parts(old: dict, new: dict) -> list[str]:
    """Human-readable names of the fingerprint parts that differ (training settings by name)."""
    out = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if a == b:
            continue
        if key == "training" and isinstance(a, dict) and isinstance(b, dict):
            names = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
            out.append(f"training settings ({', '.join(names)})")
        else:
            out.append(key)
    return out

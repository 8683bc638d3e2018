"""Where TRL also logs each training step (``training.report_to``): the registry of targets, the environment that
points each at the run's folder, and the learnable share added to what they see. The run's ``train_log.parquet`` is
written whatever the target."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from grpo_budget.errors import UserError

# report_to -> its folder in the run's folder (none: TRL reports nowhere else).
REPORT_TARGETS = {"none": None, "tensorboard": "tb", "wandb": "wandb"}


def reporting_env(report_to: str, run_dir: Path) -> dict[str, str]:
    """Environment for TRL's ``report_to``: TensorBoard event files in ``run_dir/tb`` (``tensorboard --logdir
    results/`` then finds every arm), W&B offline in ``run_dir/wandb`` (``wandb sync`` uploads it later)."""
    if report_to == "none":
        return {}
    reporting_package(report_to)
    folder = run_dir / REPORT_TARGETS[report_to]
    folder.mkdir(parents=True, exist_ok=True)
    if report_to == "tensorboard":
        return {"TENSORBOARD_LOGGING_DIR": str(folder)}
    return {"WANDB_MODE": os.environ.get("WANDB_MODE", "offline"), "WANDB_DIR": str(folder),
            "WANDB_PROJECT": os.environ.get("WANDB_PROJECT", "grpo-budget")}


def reporting_package(report_to: str) -> None:
    """Refuse a ``report_to`` whose package is not installed."""
    if report_to != "none" and importlib.util.find_spec(report_to) is None:
        raise UserError(f"training.report_to is {report_to}, but the {report_to} package is not installed: "
                        f"pip install {report_to}, or set training.report_to: none")


def learnable_share():
    """A ``TrainerCallback`` that adds ``learnable_share`` (1 - ``frac_reward_zero_std``: the share of groups with
    mixed rewards, which carry a gradient) to what the reporting callbacks see; placed first, it runs before
    them. ``log_history`` (the run's train_log) is a copy the Trainer made before, so it keeps its columns."""
    from transformers import TrainerCallback

    class LearnableShare(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs is not None and logs.get("frac_reward_zero_std") is not None:
                logs["learnable_share"] = 1.0 - float(logs["frac_reward_zero_std"])

    return LearnableShare()

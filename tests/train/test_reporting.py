"""training.report_to: TensorBoard event files in each run's folder, read back; never part of the fingerprint."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest

from grpo_budget.errors import UserError
from grpo_budget.experiment import config, plan
from grpo_budget.config.settings import Training
from grpo_budget.prepare import framearith
from grpo_budget.train import reporting, training
from grpo_budget.train.fingerprint import fingerprint
from conftest import TINY, edited_config, inputs_from, run_snakemake

DATASET = {"grading": {"mode": "lenient", "pattern": r"=\s*(-?\d+)"}, "prompt": {"chat_template": False}}
SETTINGS = {"num_generations": 4, "prompts_per_step": 4, "max_steps": 3, "save_steps": 3,
            "max_completion_length": 8, "learning_rate": 1e-3, "lora": {"r": 2, "alpha": 4}}
TAGS = {"train/reward", "train/loss", "train/learnable_share"}


def scalars(folder: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar series of the TensorBoard event files under ``folder``, as written."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out: dict[str, list[tuple[int, float]]] = {}
    for events in sorted(folder.rglob("events.out.tfevents.*")):
        acc = EventAccumulator(str(events))
        acc.Reload()
        for tag in acc.Tags()["scalars"]:
            out.setdefault(tag, []).extend((e.step, e.value) for e in acc.Scalars(tag))
    return out


@pytest.fixture()
def subset(tmp_path):
    items = framearith.generate(12, seed=0, width=4, min_ops=1, max_ops=3)
    path = tmp_path / "subset.parquet"
    items.to_parquet(path)
    return path


def test_tensorboard_events_carry_reward_learnable_share_and_loss(tmp_path, subset, tiny_model_dir):
    run = tmp_path / "run"
    training.train(subset, str(tiny_model_dir), run / "checkpoints", run / "train_log.parquet",
                   run / "manifest.json", Training.from_dict({**SETTINGS, "report_to": "tensorboard"}), DATASET, seed=0)
    series = scalars(run / "tb")
    assert TAGS <= set(series), sorted(series)
    log = pd.read_parquet(run / "train_log.parquet").dropna(subset=["reward"])
    assert [s for s, _ in series["train/reward"]] == list(log["step"])
    assert [v for _, v in series["train/reward"]] == pytest.approx(list(log["reward"]))
    learnable = 1 - log["frac_reward_zero_std"]
    assert [v for _, v in series["train/learnable_share"]] == pytest.approx(list(learnable))
    assert "learnable_share" not in log.columns  # the run's own log keeps TRL's columns


def test_off_by_default_and_not_in_the_fingerprint(tmp_path, subset, tiny_model_dir):
    assert Training.from_dict({}).report_to == "none"
    sub = pd.read_parquet(subset)
    fp = {to: fingerprint(sub, str(tiny_model_dir), Training.from_dict({**SETTINGS, "report_to": to}), DATASET, 0)
          for to in ("none", "tensorboard", "wandb")}
    assert fp["none"] == fp["tensorboard"] == fp["wandb"]
    assert fp["none"] == fingerprint(sub, str(tiny_model_dir), Training.from_dict(SETTINGS), DATASET, 0)
    assert reporting.reporting_env("none", tmp_path) == {}
    assert not (tmp_path / "tb").exists()


def test_wandb_is_offline_in_the_run_folder_and_refused_when_missing(tmp_path, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real(name, *a))
    with pytest.raises(UserError, match="pip install wandb"):
        reporting.reporting_env("wandb", tmp_path)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object())
    monkeypatch.delenv("WANDB_MODE", raising=False)
    env = reporting.reporting_env("wandb", tmp_path)
    assert env["WANDB_MODE"] == "offline" and env["WANDB_DIR"] == str(tmp_path / "wandb")


@pytest.mark.slow
def test_each_trained_arm_of_the_tiny_config_writes_its_own_events(tiny_run, tmp_path):
    """The tiny config with report_to: tensorboard, through Snakemake up to training: one event folder per arm. Its
    pool, test set and base model are the session's tiny run's, copied, so that the model is not trained again."""
    results = inputs_from(tiny_run, tmp_path / "results")
    configfile = edited_config(TINY, tmp_path / "tiny-tb.yaml", results=str(results),
                               training={"report_to": "tensorboard"},
                               scoring={"verify_samples": 0})  # verification is not on the way to training
    manifests = [plan.paths(str(results)).manifest.format(**r) for r in plan.grid(config.load(configfile))]
    assert len(manifests) == 3
    manifests = manifests[:2]  # two arms show one folder each (a third would cost a training, not a check)
    run_snakemake(sys.executable, *manifests, "--configfile", str(configfile))
    for manifest in manifests:
        run = Path(manifest).parent
        series = scalars(run / "tb")
        assert TAGS <= set(series), (run, sorted(series))
        assert [s for s, _ in series["train/reward"]] == list(range(1, 7))

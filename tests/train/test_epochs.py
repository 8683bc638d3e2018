"""Training length tied to each arm's own subset (``training.epochs``) and checkpoints at the same fractions of
training for every arm (``training.checkpoints``): the arithmetic, the fingerprint, and a real tiny run."""

import logging

import pandas as pd
import pytest

from grpo_budget.config import schema
from grpo_budget.config.settings import Training
from grpo_budget.prepare import framearith
from grpo_budget.train import training
from grpo_budget.train.fingerprint import trajectory_settings
from grpo_budget.train.schedule import schedule

DATASET = {"grading": {"mode": "lenient", "pattern": r"=\s*(-?\d+)"}, "prompt": {"chat_template": False}}
SETTINGS = {"num_generations": 2, "prompts_per_step": 4, "max_steps": 50, "save_steps": 7,
            "max_completion_length": 4, "learning_rate": 1e-3, "lora": {"r": 2, "alpha": 4}}


def plan(n_items, per_step=None, **settings):
    return schedule(n_items, Training.from_dict(settings), per_step)


def traj(settings):
    return trajectory_settings(Training.from_dict(settings))


def test_epochs_to_steps_and_checkpoints():
    assert plan(100, 16, epochs=2) == (12, [12])  # 100 // 16 = 6 steps an epoch; no checkpoints: the end only
    assert plan(100, 16, epochs=2, checkpoints=4) == (12, [3, 6, 9, 12])
    assert plan(747, 8, epochs=1.0) == (93, [93])
    assert plan(747, 8, epochs=1.0, checkpoints=4) == (93, [23, 47, 70, 93])  # 23.25, 46.5 (half up), 69.75
    # per-step prompts default to prompts_per_step (one process)
    assert plan(100, prompts_per_step=16, epochs=2) == plan(100, 16, epochs=2)
    # rounding: nearest step, halves up, never below one step
    assert plan(12, 4, epochs=1.5)[0] == 5  # 4.5
    assert plan(200, 4, epochs=0.29)[0] == 15  # 14.5 exactly (14.499999999999998 in floats)
    assert plan(40, 4, epochs=0.01)[0] == 1  # 0.1
    # max_steps and save_steps are ignored with epochs
    assert plan(100, 16, epochs=2, max_steps=5, save_steps=2) == (12, [12])
    # more checkpoints than steps: duplicates (and a step 0) dropped
    assert plan(8, 4, epochs=1, checkpoints=4) == (2, [1, 2])
    assert plan(4, 4, epochs=1, checkpoints=4) == (1, [1])


def test_without_epochs_max_steps_and_save_steps_as_before():
    assert plan(100, max_steps=10, save_steps=4) == (10, [4, 8, 10])
    assert plan(100, max_steps=8, save_steps=4) == (8, [4, 8])
    assert plan(100, max_steps=3, save_steps=5) == (3, [3])
    assert plan(5, max_steps=60, save_steps=20) == (60, [20, 40, 60])  # the subset size plays no part
    # checkpoints replace save_steps when set, epochs or not
    assert plan(100, max_steps=10, save_steps=4, checkpoints=4) == (10, [3, 5, 8, 10])  # 2.5, 5, 7.5: halves up


def test_fields_are_optional_and_validated():
    t = Training.from_dict({})
    assert (t.epochs, t.checkpoints) == (None, None)
    assert (Training.from_dict({"epochs": 2, "checkpoints": 4}).epochs, Training.from_dict({"epochs": 0.5}).epochs) \
        == (2, 0.5)
    with pytest.raises(schema.ConfigError, match="epochs"):
        Training.from_dict({"epochs": 0})
    with pytest.raises(schema.ConfigError, match="checkpoints"):
        Training.from_dict({"checkpoints": 0})


def test_fingerprint_epochs_like_max_steps_checkpoints_like_save_steps():
    base = traj(SETTINGS)
    assert "epochs" not in base and "checkpoints" not in base  # unset: fingerprints made before the fields stay
    # constant LR: neither the run's length nor where it saves shapes a step, so both resume
    assert traj({**SETTINGS, "epochs": 2, "checkpoints": 4}) == base
    assert traj({**SETTINGS, "epochs": 3}) == base
    # decaying LR: epochs counts as max_steps does, max_steps (ignored with epochs) and checkpoints do not
    linear = {**SETTINGS, "lr_scheduler_type": "linear", "epochs": 2}
    assert traj({**linear, "epochs": 3}) != traj(linear)
    assert traj({**linear, "max_steps": 7, "checkpoints": 9}) == \
        traj(linear)
    assert "max_steps" not in traj(linear)


def test_grpo_config_takes_the_arms_length(tmp_path):
    args = training.grpo_config(Training.from_dict({**SETTINGS, "epochs": 2, "checkpoints": 4}), tmp_path, 0,
                                on_gpu=False, n_items=30)
    assert (args.max_steps, args.save_steps) == (14, 1)  # 7 steps an epoch; saves at 4, 7, 11, 14 (gcd 1)
    args = training.grpo_config(Training.from_dict(SETTINGS), tmp_path, 0, on_gpu=False, n_items=30)
    assert (args.max_steps, args.save_steps) == (50, 7)  # unchanged without epochs or checkpoints


def write_subset(path, n):
    items = framearith.generate(n, seed=0, width=4, min_ops=1, max_ops=3)
    items["pass_rate"] = 0.5
    items.to_parquet(path)
    return path


def test_arms_of_different_sizes_train_for_their_own_length(tmp_path, tiny_model_dir, caplog):
    settings = {**SETTINGS, "epochs": 1.5, "checkpoints": 3}
    manifests = {}
    for n in (16, 32):
        arm = tmp_path / f"arm{n}"
        arm.mkdir()
        subset = write_subset(arm / "subset.parquet", n)
        manifests[n] = training.train(subset, str(tiny_model_dir), arm / "ck", arm / "log.parquet",
                                      arm / "manifest.json", Training.from_dict(settings), DATASET, seed=0)
    small, large = manifests[16], manifests[32]
    # 16 items / 4 prompts a step = 4 steps an epoch -> 6 steps; 32 items -> 8 an epoch -> 12 steps
    assert (small["final_step"], small["steps_per_epoch"], small["epochs"]) == (6, 4, 1.5)
    assert (large["final_step"], large["steps_per_epoch"], large["epochs"]) == (12, 8, 1.5)
    # checkpoints at the same thirds of training, and nothing else saved (not save_steps' 7)
    for m in (small, large):
        steps = [c["step"] for c in m["checkpoints"]]
        assert steps == m["planned_checkpoints"]
        assert [s / m["final_step"] for s in steps] == pytest.approx([1 / 3, 2 / 3, 1])
    assert small["planned_checkpoints"] == [2, 4, 6] and large["planned_checkpoints"] == [4, 8, 12]
    assert sorted(p.name for p in (tmp_path / "arm16" / "ck").glob("checkpoint-*")) == \
        ["checkpoint-2", "checkpoint-4", "checkpoint-6"]
    log = pd.read_parquet(tmp_path / "arm32" / "log.parquet")
    assert log.dropna(subset=["reward"])["step"].tolist() == list(range(1, 13))  # across epoch boundaries

    # more epochs on the small arm resume from its last checkpoint (constant LR): 2.5 epochs -> 10 steps
    arm = tmp_path / "arm16"
    with caplog.at_level(logging.WARNING, logger="grpo_budget.train.training"):
        longer = training.train(arm / "subset.parquet", str(tiny_model_dir), arm / "ck", arm / "log.parquet",
                                arm / "manifest.json",
                                Training.from_dict({**settings, "epochs": 2.5, "checkpoints": 2}), DATASET, seed=0)
    assert (longer["resumed_from_step"], longer["final_step"], longer["planned_checkpoints"]) == (6, 10, [5, 10])
    assert longer["fingerprint"] == small["fingerprint"]
    # the steps it resumed past keep the checkpoints they have (5 was planned but lies before step 6)
    assert [c["step"] for c in longer["checkpoints"]] == [2, 4, 6, 10]
    assert "planned checkpoint steps [5] are missing" in caplog.text

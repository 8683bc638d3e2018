"""Exact resume: a run killed after any checkpoint and resumed ends with the checkpoints and train log of the run that
was never interrupted, past the subset's first pass, for every method with dynamic sampling on and off; the pass
order (grpo_budget.train.sampler) and the log's assembly (grpo_budget.train.trainlog) with known answers."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from grpo_budget.digest import sha256_of
from grpo_budget.config.settings import Training
from grpo_budget.prepare import framearith
from grpo_budget.train import training, trainlog
from grpo_budget.train.checkpoints import checkpoints
from grpo_budget.train.sampler import epoch_sampler

DATASET = {"grading": {"mode": "lenient", "pattern": r"=\s*(-?\d+)"}, "prompt": {"chat_template": False}}
ITEMS, PROMPTS = 8, 4  # two steps a pass: steps 1-2 are the first pass, 3-4 the second, 5 begins the third
SETTINGS = {"num_generations": 4, "prompts_per_step": PROMPTS, "max_steps": 5, "save_steps": 1,
            "max_completion_length": 8, "learning_rate": 1e-2, "lora": {"r": 2, "alpha": 4},
            "rewards": {"correct": 1.0, "format": 0.5}}
# What resume needs of a checkpoint beside the adapter; trainer_state.json holds wall times (step_time).
STATE_FILES = ("adapter_model.safetensors", "optimizer.pt", "scheduler.pt", "rng_state.pth")


# --- the pass order and the log, by hand -------------------------------------------------------------------------


def passes(sampler, n: int, set_epoch: bool = False) -> list[list[int]]:
    out = []
    for e in range(n):
        if set_epoch:
            sampler.set_epoch(e)
        out.append(list(sampler))
    return out


def test_each_pass_takes_the_order_trls_sampler_gives_it_however_the_run_got_there():
    from trl.trainer.utils import RepeatSampler

    kwargs = dict(data_source=list(range(10)), mini_repeat_count=2, batch_size=3, repeat_count=2, seed=7)
    trl = passes(RepeatSampler(**kwargs), 4)
    assert len({tuple(p) for p in trl}) == 4  # each pass its own order
    assert passes(epoch_sampler(**kwargs), 4) == trl  # passes one after another, as an uninterrupted run
    assert passes(epoch_sampler(**kwargs), 4, set_epoch=True) == trl  # told each pass, as the Trainer does
    for e in range(3):  # a resumed run's sampler, new, told its first pass; untold, it takes the next one
        fresh = epoch_sampler(**kwargs)
        fresh.set_epoch(e)
        assert (list(fresh), list(fresh)) == (trl[e], trl[e + 1])
    assert passes(epoch_sampler(**dict(kwargs, shuffle=False)), 2) == passes(RepeatSampler(**dict(kwargs,
                                                                                                  shuffle=False)), 2)


def test_a_resumed_log_gets_the_whole_runs_train_loss_and_the_columns_as_first_logged():
    losses = [0.5, -0.25, 0.125, 1e-17]
    steps = [{"loss": v, "reward": i, "epoch": i / 2, "step": i} for i, v in enumerate(losses, 1)]
    assert trainlog.train_loss(steps) == ((((0.0 + 0.5) - 0.25) + 0.125) + 1e-17) / 4
    restored = [dict(sorted(r.items())) for r in steps[:2]]  # as trainer_state.json keeps them
    final = {"train_runtime": 9.0, "train_samples_per_second": 1.0, "train_steps_per_second": 0.1,
             "total_flos": 3.0, "train_loss": 0.75, "epoch": 2.0, "step": 4}
    straight = pd.DataFrame(steps + [dict(final, train_loss=trainlog.train_loss(steps))])
    resumed = trainlog.whole_run(restored + steps[2:] + [final], 2)
    assert list(resumed.columns) == list(straight.columns)
    pd.testing.assert_frame_equal(resumed, straight)
    # killed after its last checkpoint: nothing trained, the final row rebuilt from the checkpoint, wall times NaN
    nothing = trainlog.whole_run([dict(sorted(r.items())) for r in steps], 4,
                                 {"total_flos": 3.0, "epoch": 2.0, "global_step": 4}, list(steps[0]))
    expected = straight.copy()
    expected.loc[4, ["train_runtime", "train_samples_per_second", "train_steps_per_second"]] = math.nan
    pd.testing.assert_frame_equal(nothing, expected)
    # trained from step 0: as the Trainer logged it
    pd.testing.assert_frame_equal(trainlog.whole_run(steps + [final], 0), pd.DataFrame(steps + [final]))


# --- real runs on the tiny model ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def taught_model(tmp_path_factory, tiny_model_dir) -> Path:
    """The tiny model after 20 supervised steps on frame-arithmetic solutions: it writes a readable answer most of
    the time and a right one about one time in ten, so that groups have mixed rewards and the adapter learns."""
    import torch
    from transformers import AutoModelForCausalLM

    from grpo_budget.generation.backends import load_tokenizer
    from grpo_budget.train import tinymodel

    tok = load_tokenizer(str(tiny_model_dir))
    model = AutoModelForCausalLM.from_pretrained(str(tiny_model_dir))
    items = framearith.generate(512, seed=1, width=4, min_ops=1, max_ops=3)
    x, y = (torch.tensor(a) for a in tinymodel.encode_examples(tok, list(items["prompt"]), list(items["solution"])))
    torch.manual_seed(0)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    rng = np.random.default_rng(0)
    for _ in range(20):
        idx = torch.as_tensor(rng.choice(len(x), size=64, replace=False))
        loss = model(input_ids=x[idx], attention_mask=(x[idx] != tok.pad_token_id).long(), labels=y[idx]).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    out = tmp_path_factory.mktemp("taught-model")
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def subset(tmp_path_factory) -> Path:
    items = framearith.generate(ITEMS, seed=0, width=4, min_ops=1, max_ops=3)
    path = tmp_path_factory.mktemp("subset") / "subset.parquet"
    items.to_parquet(path)
    return path


def train(run: Path, subset: Path, model: Path, **overrides) -> dict:
    return training.train(subset, str(model), run / "checkpoints", run / "train_log.parquet", run / "manifest.json",
                          Training.from_dict({**SETTINGS, **overrides}), DATASET, seed=0)


def killed_after(straight: Path, run: Path, step: int) -> None:
    """What a job killed right after saving ``checkpoint-{step}`` leaves: its checkpoints folder without the later
    checkpoints, and no log or manifest."""
    shutil.copytree(straight / "checkpoints", run / "checkpoints")
    for s, path in checkpoints(run / "checkpoints"):
        if s > step:
            shutil.rmtree(path)


def state(run: Path) -> dict[int, dict[str, str]]:
    """Per checkpoint, the sha256 of the files resume reads (the adapter's is what the manifest lists)."""
    return {s: {name: sha256_of(path / name) for name in STATE_FILES} for s, path in checkpoints(run / "checkpoints")}


def log(run: Path) -> pd.DataFrame:
    frame = pd.read_parquet(run / "train_log.parquet")
    return frame.drop(columns=["resumed_from", *[c for c in trainlog.WALL_CLOCK if c in frame]])


def assert_same_run(straight: Path, resumed: Path, manifest: dict) -> None:
    listed = {c["step"]: c["sha256"] for c in manifest["checkpoints"]}
    expected = state(straight)
    assert listed == {s: expected[s]["adapter_model.safetensors"] for s in listed}
    assert state(resumed) == {s: expected[s] for s in state(resumed)}
    pd.testing.assert_frame_equal(log(resumed), log(straight))


@pytest.mark.parametrize(("method", "dynamic", "accumulation", "updates"), [
    ("grpo", True, 2, 2), ("codapo", False, 1, 2), ("codapo", True, 1, 2), ("codapo", False, 1, 1),
    ("guided", False, 2, 2), ("guided", True, 1, 2)])
def test_a_run_resumed_in_its_second_pass_ends_as_the_uninterrupted_run(tmp_path, taught_model, subset, method,
                                                                          dynamic, accumulation, updates):
    """Killed after step 3, the second pass's first step; resumed, it trains on into the third pass (some with two
    micro-batches a step, whose generation batch TRL keeps between them). CoDaPO's two updates make a pass four
    steps: killed between the second batch's two updates (its selection travels in the checkpoint), it trains on
    into the second pass."""
    settings = {"method": method, "dynamic_sampling": dynamic, "gradient_accumulation_steps": accumulation,
                **({"codapo_updates": updates} if method == "codapo" else {})}
    train(tmp_path / "straight", subset, taught_model, **settings)
    killed_after(tmp_path / "straight", tmp_path / "resumed", 3)
    manifest = train(tmp_path / "resumed", subset, taught_model, **settings)
    assert (manifest["resumed_from_step"], manifest["final_step"]) == (3, 5)
    assert_same_run(tmp_path / "straight", tmp_path / "resumed", manifest)


def test_grpo_resumed_after_any_checkpoint_or_with_other_save_steps_ends_as_the_uninterrupted_run(
        tmp_path, taught_model, subset):
    """Killed inside a later pass, at the end of a pass, after its last checkpoint (nothing left to train but the
    log), and resumed with another ``save_steps`` (which the fingerprint leaves out, so it resumes)."""
    straight = tmp_path / "straight"
    train(straight, subset, taught_model)
    reference = state(straight)
    assert len({s["adapter_model.safetensors"] for s in reference.values()}) == 5  # every step changed the adapter
    for step in (3, 4, 5):
        killed_after(straight, tmp_path / f"after-{step}", step)
        manifest = train(tmp_path / f"after-{step}", subset, taught_model)
        assert manifest["resumed_from_step"] == step
        assert_same_run(straight, tmp_path / f"after-{step}", manifest)
    # saved every third step, killed after the first save, resumed saving every second: steps 4 and 5 (the last)
    killed_after(straight, tmp_path / "other-saves", 3)
    for s, path in checkpoints(tmp_path / "other-saves" / "checkpoints"):
        if s != 3:
            shutil.rmtree(path)
    manifest = train(tmp_path / "other-saves", subset, taught_model, save_steps=2)
    assert [c["step"] for c in manifest["checkpoints"]] == [3, 4, 5]
    assert_same_run(straight, tmp_path / "other-saves", manifest)

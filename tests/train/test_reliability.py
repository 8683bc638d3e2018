"""Nothing silently wrong in training: checkpoints tied to the run that made them, a subset too small for one step
refused, incomplete checkpoints set aside rather than resumed (or blocking), and broken Parquet inputs named."""

import json
import logging
import shlex
import shutil

import pandas as pd
import pytest
import torch
from safetensors.torch import save_file

from grpo_budget import io
from grpo_budget.errors import UserError
from grpo_budget.config.settings import Training
from grpo_budget.prepare import framearith
from grpo_budget.train import training
from grpo_budget.train.checkpoints import checkpoints, discard_incomplete, incomplete_reason, record_digests
from grpo_budget.train.fingerprint import fingerprint, trajectory_settings
from grpo_budget.train.schedule import prompts_per_generation

DATASET = {"grading": {"mode": "lenient", "pattern": r"=\s*(-?\d+)"}, "prompt": {"chat_template": False}}
SETTINGS = {"num_generations": 2, "prompts_per_step": 2, "max_steps": 2, "save_steps": 1,
            "max_completion_length": 4, "learning_rate": 1e-3, "lora": {"r": 2, "alpha": 4}}


def traj(settings):
    return trajectory_settings(Training.from_dict(settings))


def write_subset(path, n=8, seed=0):
    items = framearith.generate(n, seed=seed, width=4, min_ops=1, max_ops=3)
    items["pass_rate"] = 0.5
    items.to_parquet(path)
    return path


@pytest.fixture()
def subset(tmp_path):
    return write_subset(tmp_path / "subset.parquet")


def run(tmp_path, subset, model, **overrides):
    return training.train(subset, str(model), tmp_path / "ck", tmp_path / "log.parquet", tmp_path / "manifest.json",
                          Training.from_dict({**SETTINGS, **overrides}), DATASET, seed=0)


def steps(manifest):
    return [c["step"] for c in manifest["checkpoints"]]


def test_changed_subset_starts_fresh_and_keeps_old_checkpoints(tmp_path, subset, tiny_model_dir, caplog):
    first = run(tmp_path, subset, tiny_model_dir)
    other = write_subset(tmp_path / "other.parquet", seed=1)
    with caplog.at_level(logging.WARNING, logger="grpo_budget.train.checkpoints"):
        second = run(tmp_path, other, tiny_model_dir)
    assert (second["resumed_from_step"], second["final_step"], steps(second)) == (0, 2, [1, 2])
    assert second["fingerprint"] != first["fingerprint"]
    assert json.loads((tmp_path / "ck" / "fingerprint.json").read_text())["fingerprint"] == second["fingerprint"]
    stale = tmp_path / "ck.stale-1"
    assert (stale / "checkpoint-2" / "adapter_model.safetensors").exists()  # kept, not deleted
    assert json.loads((stale / "fingerprint.json").read_text())["fingerprint"] == first["fingerprint"]
    assert "subset changed" in caplog.text and str(stale) in caplog.text and "step 0" in caplog.text

    # checkpoints of unknown origin (a folder from before fingerprints) are not trusted either
    (tmp_path / "ck" / "fingerprint.json").unlink()
    third = run(tmp_path, other, tiny_model_dir)
    assert third["resumed_from_step"] == 0 and (tmp_path / "ck.stale-2" / "checkpoint-2").is_dir()


def test_extending_max_steps_resumes_and_shortening_never_overshoots(tmp_path, subset, tiny_model_dir):
    first = run(tmp_path, subset, tiny_model_dir, max_steps=2)
    longer = run(tmp_path, subset, tiny_model_dir, max_steps=3, save_steps=2)  # save_steps may change too
    assert (longer["resumed_from_step"], longer["final_step"], steps(longer)) == (2, 3, [1, 2, 3])
    shorter = run(tmp_path, subset, tiny_model_dir, max_steps=2)  # checkpoint-3 is past this run's end
    assert (shorter["resumed_from_step"], shorter["final_step"], steps(shorter)) == (2, 2, [1, 2])
    assert first["fingerprint"] == longer["fingerprint"] == shorter["fingerprint"]
    assert not (tmp_path / "ck.stale-1").exists()


def test_fingerprint_covers_what_shapes_the_trajectory(tmp_path, subset):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text('{"hidden_size": 8}')
    (model / "model.safetensors").write_bytes(b"\0" * 100)
    items = pd.read_parquet(subset)

    def fp(items=items, settings=SETTINGS, dataset=DATASET, seed=0):
        return fingerprint(items, str(model), Training.from_dict(settings), dataset, seed)["fingerprint"]

    base = fp()
    # resuming to extend a run, and changing how often it saves, keep the fingerprint (constant LR schedule)
    assert fp(settings={**SETTINGS, "max_steps": 50, "save_steps": 7}) == base
    items.to_parquet(tmp_path / "rewritten.parquet")
    assert fp(items=pd.read_parquet(tmp_path / "rewritten.parquet")) == base  # same content, new file
    (model / "config.json").touch()
    assert fp() == base  # mtimes do not count, so a copied model folder keeps it
    moved = tmp_path / "moved"
    shutil.copytree(model, moved)
    assert fingerprint(items, str(moved), Training.from_dict(SETTINGS), DATASET, 0)["fingerprint"] == base  # nor paths
    assert "top_k" not in traj(SETTINGS)  # 0 (TRL's no-cut default), as before the field: fingerprints stay
    assert fp(settings={**SETTINGS, "top_k": 20}) != base and fp(settings={**SETTINGS, "top_k": None}) != base
    # everything else changes it
    assert fp(settings={**SETTINGS, "learning_rate": 5e-4}) != base
    assert fp(settings={**SETTINGS, "lora": {"r": 4, "alpha": 4}}) != base
    assert fp(seed=1) != base
    assert fp(dataset={**DATASET, "grading": {"mode": "strict"}}) != base
    assert fp(items=items.iloc[:-1]) != base
    assert fp(items=items.iloc[::-1]) != base  # TRL's sampler permutes row indices: order changes the run
    (model / "model.safetensors").write_bytes(b"\1" * 100)  # a re-bootstrapped model
    assert fp() != base
    # a decaying LR schedule depends on max_steps, so there it counts
    linear = {**SETTINGS, "lr_scheduler_type": "linear"}
    assert fp(settings={**linear, "max_steps": 50}) != fp(settings=linear)
    assert "max_steps" not in traj(SETTINGS)
    assert "save_steps" not in traj(linear)


def test_subset_too_small_for_one_step_is_refused(tmp_path, tiny_model_dir):
    small = write_subset(tmp_path / "subset.parquet", n=3)
    with pytest.raises(UserError, match=r"subset\.parquet has 3 items.*training\.prompts_per_step = 4.*budget"):
        run(tmp_path, small, tiny_model_dir, prompts_per_step=4)
    assert not (tmp_path / "ck").exists() and not (tmp_path / "manifest.json").exists()
    args = training.grpo_config(Training.from_dict({**SETTINGS, "prompts_per_step": 4}), tmp_path, 0, on_gpu=False)
    assert prompts_per_generation(args) == 4  # TRL drops a short final chunk of this many prompts


def test_zero_step_training_never_writes_a_manifest(tmp_path, tiny_model_dir, monkeypatch):
    # Past the up-front check, TRL really trains zero steps on a subset smaller than one step's prompts.
    monkeypatch.setattr(training, "check_trainable", lambda *a: None, raising=False)
    small = write_subset(tmp_path / "subset.parquet", n=3)
    with pytest.raises(RuntimeError, match="zero optimizer steps"):
        run(tmp_path, small, tiny_model_dir, prompts_per_step=4)
    assert not (tmp_path / "manifest.json").exists() and not (tmp_path / "ck" / "checkpoint-0").exists()


@pytest.mark.parametrize("bad, says", [
    ({"rewards": {"corect": 1.0}}, "unknown reward 'corect'; allowed: correct, format, partial"),
    ({"lora": {"r": 2, "alpha": 4, "target_modules": "atention"}}, "matches no module of LlamaForCausalLM"),
    ({"lora": {"r": 2, "alpha": 4, "target_modules": ["q_proj", "v_projj"]}}, "v_projj match no module"),
])
def test_a_config_error_never_moves_a_finished_runs_checkpoints_aside(tmp_path, subset, tiny_model_dir, bad, says):
    """A setting of the fingerprint that cannot train (a config that skipped validation, LoRA targets this model
    lacks) is refused before the checkpoint folder is claimed: the finished run's checkpoints stay, and the fixed
    config resumes them rather than training from step 0."""
    first = run(tmp_path, subset, tiny_model_dir)
    with pytest.raises(UserError, match=says):
        run(tmp_path, subset, tiny_model_dir, **bad)
    assert not (tmp_path / "ck.stale-1").exists()
    assert json.loads((tmp_path / "ck" / "fingerprint.json").read_text())["fingerprint"] == first["fingerprint"]
    again = run(tmp_path, subset, tiny_model_dir)
    assert (again["resumed_from_step"], steps(again)) == (2, [1, 2])


def test_checkpoint_missing_adapter_is_set_aside_and_resume_uses_previous(tmp_path, subset, tiny_model_dir):
    run(tmp_path, subset, tiny_model_dir)
    (tmp_path / "ck" / "checkpoint-2" / "adapter_model.safetensors").unlink()
    manifest = run(tmp_path, subset, tiny_model_dir)
    assert (manifest["resumed_from_step"], manifest["final_step"], steps(manifest)) == (1, 2, [1, 2])
    aside = tmp_path / "ck" / "incomplete" / "checkpoint-2.1"
    assert (aside / "trainer_state.json").exists() and not (aside / "adapter_model.safetensors").exists()
    assert (tmp_path / "ck" / "checkpoint-2" / "adapter_model.safetensors").exists()


def fake_checkpoint(path):
    """The files resume loads, each readable, and their digests."""
    path.mkdir()
    (path / "trainer_state.json").write_text('{"global_step": 1}')
    (path / "adapter_config.json").write_text("{}")
    save_file({"w": torch.zeros(4)}, path / "adapter_model.safetensors")
    for name in ("optimizer.pt", "scheduler.pt", "rng_state.pth"):
        torch.save({}, path / name)
    record_digests(path)
    return path


def test_checkpoint_completeness_and_setting_aside(tmp_path):
    fake_checkpoint(tmp_path / "checkpoint-1")
    weights = fake_checkpoint(tmp_path / "checkpoint-2") / "adapter_model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-3])  # truncated
    (fake_checkpoint(tmp_path / "checkpoint-3") / "optimizer.pt").unlink()
    (fake_checkpoint(tmp_path / "checkpoint-4") / "trainer_state.json").write_text('{"trunc')
    assert [s for s, _ in checkpoints(tmp_path)] == [1]
    assert "adapter_model" in incomplete_reason(tmp_path / "checkpoint-2")
    assert "optimizer.pt" in incomplete_reason(tmp_path / "checkpoint-3")
    assert discard_incomplete(tmp_path) == [tmp_path / f"checkpoint-{i}" for i in (2, 3, 4)]
    assert sorted(p.name for p in (tmp_path / "incomplete").iterdir()) == ["checkpoint-2.1", "checkpoint-3.1",
                                                                           "checkpoint-4.1"]


def test_read_parquet_names_a_broken_file(tmp_path, tiny_model_dir):
    good = write_subset(tmp_path / "good.parquet")
    assert len(io.read_parquet(good, columns=["prompt"]).columns) == 1
    broken = tmp_path / "subset.parquet"
    broken.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    with pytest.raises(UserError, match=r"subset\.parquet is not a readable Parquet file .*delete it") as e:
        io.read_parquet(broken)
    assert "\n" not in str(e.value)
    with pytest.raises(UserError, match=r"missing\.parquet does not exist"):
        io.read_parquet(tmp_path / "missing.parquet")
    with pytest.raises(UserError, match=r"good\.parquet lacks column\(s\) nope"):
        io.read_parquet(good, columns=["prompt", "nope"])
    with pytest.raises(UserError, match=r"subset\.parquet is not a readable Parquet file"):
        run(tmp_path, broken, tiny_model_dir)  # training reads its subset through it


def test_memory_knobs_do_not_change_the_fingerprint():
    """Lowering memory use after an out-of-memory failure must resume, not retrain; the learning rate must not."""
    base = traj({})
    assert traj({"gradient_checkpointing": True, "vllm_gpu_memory_utilization": 0.2}) == base
    assert traj({"learning_rate": 5e-4}) != base


def test_a_full_disk_during_a_checkpoint_save_is_one_line(tmp_path, subset, tiny_model_dir):
    """A real full disk: the checkpoint folder on a 56 KiB tmpfs (mounted in a user and mount namespace), room for
    the run's fingerprint and the adapter but not the optimizer state. torch.save's own error was "[enforce fail at
    inline_container.cc:672] . unexpected pos"; the job says the disk is full, naming the checkpoint, and removes
    the cut-off one."""
    import subprocess
    import sys

    ck = tmp_path / "ck"
    ck.mkdir()
    probe = subprocess.run(["unshare", "-rm", "sh", "-c", f"mount -t tmpfs -o size=4k tmpfs {ck}"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs in a user namespace here: {probe.stderr.decode().strip()}")
    grpo = [sys.executable, "-m", "grpo_budget.cli", "train", "--subset", str(subset), "--model", str(tiny_model_dir),
            "--checkpoints", str(ck), "--settings", json.dumps(SETTINGS), "--dataset", json.dumps(DATASET),
            "--seed", "0", "--log-out", str(tmp_path / "log.parquet"), "--manifest-out", str(tmp_path / "m.json")]
    script = f"mount -t tmpfs -o size=56k tmpfs {ck} && {' '.join(map(shlex.quote, grpo))}; echo rc=$?; ls -A {ck}"
    out = subprocess.run(["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True)
    line = f"grpo-budget: error: {ck}/checkpoint-1: the disk is full (0 MiB free on the filesystem of {ck}); free " \
           "space and run again — training resumes from its last complete checkpoint"
    assert line in out.stderr, out.stderr[-3000:]
    assert "Traceback" not in out.stderr and "inline_container" not in out.stderr
    assert out.stdout.split()[-3:] == ["rc=2", "README.md", "fingerprint.json"]  # the cut-off checkpoint-1 is gone

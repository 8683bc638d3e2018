"""GRPO training on a tiny model for real: TRL + PEFT on CPU, checkpoints, resume, trainer log."""

import json

import pandas as pd
import pytest

from grpo_budget import learnability
from grpo_budget.errors import UserError
from grpo_budget.config.settings import Training
from grpo_budget.prepare import framearith
from grpo_budget.train import training

DATASET = {"grading": {"mode": "lenient", "pattern": r"=\s*(-?\d+)"}, "prompt": {"chat_template": False}}
SETTINGS = {"num_generations": 4, "prompts_per_step": 4, "max_steps": 4, "save_steps": 2,
            "max_completion_length": 8, "learning_rate": 1e-3, "lora": {"r": 2, "alpha": 4}}


@pytest.fixture()
def subset(tmp_path):
    items = framearith.generate(16, seed=0, width=4, min_ops=1, max_ops=3)
    items["pass_rate"] = 0.5
    path = tmp_path / "subset.parquet"
    items.to_parquet(path)
    return path


def run(tmp_path, subset, model, **overrides):
    return training.train(subset, str(model), tmp_path / "ck", tmp_path / "log.parquet", tmp_path / "manifest.json",
                          Training.from_dict({**SETTINGS, **overrides}), DATASET, seed=0)


def test_train_writes_checkpoints_log_and_manifest(tmp_path, subset, tiny_model_dir):
    manifest = run(tmp_path, subset, tiny_model_dir)
    assert [c["step"] for c in manifest["checkpoints"]] == [2, 4]
    assert json.loads((tmp_path / "manifest.json").read_text()) == manifest
    # the loss the run minimised, read off the GRPOConfig TRL ran (no vLLM: no importance-sampling correction)
    assert manifest["objective"] == {
        "loss_type": "dapo", "beta": 0.0, "epsilon": 0.2, "epsilon_high": 0.2, "delta": None, "scale_rewards": "group",
        "importance_sampling_level": "token", "num_iterations": 1, "mask_truncated_completions": False,
        "top_entropy_quantile": 1.0, "off_policy_mask_threshold": None, "temperature": 1.0, "use_vllm": False}
    log = pd.read_parquet(tmp_path / "log.parquet")
    assert {"step", "reward", "frac_reward_zero_std", "loss"} <= set(log.columns)
    learn = learnability.learnable_from_log(log)  # the learnable-% reading of a real trainer log
    assert list(learn["step"]) == [1, 2, 3, 4]
    assert learn["learnable"].between(0, 1).all()
    assert learn["learnable_cum"].iloc[-1] == pytest.approx(learn["learnable"].mean())
    assert (tmp_path / "ck" / "checkpoint-4" / "adapter_model.safetensors").exists()
    # what resume needs (adapter, optimizer, scheduler, RNG, trainer state), not a tokenizer copy per checkpoint
    for c in manifest["checkpoints"]:
        names = {p.name for p in (tmp_path / "ck" / f"checkpoint-{c['step']}").iterdir()}
        assert {"adapter_model.safetensors", "optimizer.pt", "scheduler.pt", "trainer_state.json"} <= names
        assert not names & {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja"}


def test_resume_continues_from_last_complete_checkpoint(tmp_path, subset, tiny_model_dir):
    run(tmp_path, subset, tiny_model_dir, max_steps=4)
    # a killed job leaves a half-written checkpoint: it must be discarded, not resumed from
    broken = tmp_path / "ck" / "checkpoint-6"
    broken.mkdir()
    (broken / "adapter_model.safetensors").write_bytes(b"partial")
    manifest = run(tmp_path, subset, tiny_model_dir, max_steps=6)
    assert manifest["resumed_from_step"] == 4
    assert [c["step"] for c in manifest["checkpoints"]] == [2, 4, 6]
    log = pd.read_parquet(tmp_path / "log.parquet")
    steps = log.dropna(subset=["reward"])["step"].tolist()
    assert steps == [1, 2, 3, 4, 5, 6]  # the history continues; steps 1-4 were not trained again



@pytest.mark.parametrize("wanted", [False, True])
def test_gradient_checkpointing_is_what_the_config_says(tmp_path, wanted):
    """TRL's GRPOConfig defaults it to on; a configured false must reach the trainer (it used to be always on, on
    CPU as on GPU: one code path sets it for both)."""
    args = training.grpo_config(Training.from_dict({**SETTINGS, "gradient_checkpointing": wanted}), tmp_path, 0,
                                on_gpu=False)
    assert args.gradient_checkpointing is wanted


def test_the_policy_is_loaded_in_the_models_dtype():
    import torch

    assert training.load_dtype("auto", bf16=False) is torch.float32  # CPU: full precision
    assert training.load_dtype("auto", bf16=True) is torch.bfloat16
    assert training.load_dtype("float16", bf16=True) is torch.float16  # models.NAME.dtype wins


def test_the_memory_plans_vllm_settings_reach_trl(tmp_path):
    t = Training.from_dict({**SETTINGS, "use_vllm": True, "vllm_gpu_memory_utilization": 0.39,
                            "vllm_max_model_length": 1274, "gradient_checkpointing": True,
                            "bf16": False})  # this CPU machine: transformers refuses bf16 without a GPU
    args = training.grpo_config(t, tmp_path, 0, on_gpu=True)
    assert (args.vllm_gpu_memory_utilization, args.vllm_max_model_length) == (0.39, 1274)
    assert args.use_vllm and args.gradient_checkpointing
    # TRL's importance-sampling correction as the schema sets it (TIS), not TRL 1.16's own defaults (sequence_mask, 3)
    assert (args.vllm_importance_sampling_correction, args.vllm_importance_sampling_mode,
            args.vllm_importance_sampling_clip_max, args.vllm_importance_sampling_clip_min) == \
        (True, "token_truncate", 2.0, None)
    trl = Training.from_dict({**SETTINGS, "use_vllm": True, "vllm_gpu_memory_utilization": 0.39, "bf16": False,
                              "vllm_importance_sampling_mode": "sequence_mask", "vllm_importance_sampling_clip_max": 3.0})
    args = training.grpo_config(trl, tmp_path, 0, on_gpu=True)
    assert (args.vllm_importance_sampling_mode, args.vllm_importance_sampling_clip_max) == ("sequence_mask", 3.0)
    off = Training.from_dict({**SETTINGS, "use_vllm": True, "vllm_gpu_memory_utilization": 0.39, "bf16": False,
                              "vllm_importance_sampling_correction": False})
    assert training.grpo_config(off, tmp_path, 0, on_gpu=True).vllm_importance_sampling_correction is False
    with pytest.raises(UserError, match="vllm_gpu_memory_utilization is auto"):
        training.grpo_config(Training.from_dict({**SETTINGS, "use_vllm": True, "bf16": False}), tmp_path, 0,
                             on_gpu=True)

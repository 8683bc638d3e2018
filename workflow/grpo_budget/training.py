"""GRPO with TRL's ``GRPOTrainer`` and a PEFT LoRA adapter on a selected subset; resumes from its last checkpoint.

Checkpoints live in a folder that is *not* a Snakemake output (Snakemake deletes outputs before it re-runs a
job); the declared outputs, ``log_history.parquet`` and ``manifest.json``, are written atomically at the end.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
from pathlib import Path

import pandas as pd

from . import grading, prompts
from .io import write_json, write_parquet

log = logging.getLogger(__name__)

CHECKPOINT_RE = re.compile(r"^checkpoint-(\d+)$")

DEFAULTS = {
    "num_generations": 8,
    "prompts_per_step": 32,
    "learning_rate": 2e-3,
    "max_steps": 60,
    "save_steps": 20,
    "max_completion_length": 20,
    "beta": 0.0,
    "temperature": 1.0,
    "top_p": 1.0,
    "lr_scheduler_type": "constant",
    "warmup_ratio": 0.0,
    "weight_decay": 0.0,
    "adam_beta1": 0.9,
    "adam_beta2": 0.999,
    "max_grad_norm": 1.0,
    "gradient_accumulation_steps": 1,
    "bf16": True,
    "gradient_checkpointing": False,
    "use_vllm": False,
    "vllm_mode": "colocate",
    "vllm_gpu_memory_utilization": 0.3,
    "loss_type": "dapo",
    "scale_rewards": "group",
    "lora": {"r": 16, "alpha": 32, "dropout": 0.0, "target_modules": "all-linear"},
}


def checkpoints(folder: str | Path) -> list[tuple[int, Path]]:
    """Complete checkpoints in ``folder`` as (step, path), oldest first.

    A checkpoint counts as complete when its ``trainer_state.json`` (written last by the Trainer) parses.
    """
    folder = Path(folder)
    found = []
    for p in folder.glob("checkpoint-*") if folder.exists() else []:
        m = CHECKPOINT_RE.match(p.name)
        if not m or not p.is_dir():
            continue
        try:
            json.loads((p / "trainer_state.json").read_text())
        except (OSError, ValueError):
            continue
        found.append((int(m.group(1)), p))
    return sorted(found)


def discard_incomplete(folder: str | Path) -> list[Path]:
    """Remove checkpoint folders a killed job left half-written, so that resuming never reads them."""
    complete = {p for _, p in checkpoints(folder)}
    removed = []
    for p in Path(folder).glob("checkpoint-*") if Path(folder).exists() else []:
        if p.is_dir() and p not in complete:
            shutil.rmtree(p)
            removed.append(p)
    return removed


def grpo_config(settings: dict, out_dir: Path, seed: int, on_gpu: bool):
    """``GRPOConfig`` from the config's training section (CPU-safe defaults when no GPU is present)."""
    from trl import GRPOConfig

    s = {**DEFAULTS, **settings}
    per_device = int(s["prompts_per_step"]) * int(s["num_generations"]) // int(s["gradient_accumulation_steps"])
    extra = {}
    if on_gpu and s["gradient_checkpointing"]:
        extra["gradient_checkpointing"] = True
    if on_gpu and s["use_vllm"]:
        extra.update(use_vllm=True, vllm_mode=s["vllm_mode"], vllm_gpu_memory_utilization=s["vllm_gpu_memory_utilization"])
    return GRPOConfig(
        output_dir=str(out_dir),
        per_device_train_batch_size=per_device,
        gradient_accumulation_steps=int(s["gradient_accumulation_steps"]),
        num_generations=int(s["num_generations"]),
        learning_rate=float(s["learning_rate"]),
        lr_scheduler_type=s["lr_scheduler_type"],
        warmup_steps=float(s["warmup_ratio"]),  # a float in [0, 1) is a ratio of max_steps
        weight_decay=float(s["weight_decay"]),
        adam_beta1=float(s["adam_beta1"]),
        adam_beta2=float(s["adam_beta2"]),
        max_grad_norm=float(s["max_grad_norm"]),
        max_steps=int(s["max_steps"]),
        save_strategy="steps",
        save_steps=int(s["save_steps"]),
        logging_steps=1,
        max_completion_length=int(s["max_completion_length"]),
        beta=float(s["beta"]),
        temperature=float(s["temperature"]),
        top_p=float(s["top_p"]),
        loss_type=s["loss_type"],
        scale_rewards=s["scale_rewards"],
        chat_template_kwargs=s.get("chat_template_kwargs") or None,
        use_cpu=not on_gpu,
        bf16=bool(on_gpu and s["bf16"]),
        seed=seed,
        data_seed=seed,
        report_to="none",
        disable_tqdm=False,
        **extra,
    )


def lora_config(settings: dict):
    from peft import LoraConfig

    lora = {**DEFAULTS["lora"], **settings.get("lora", {})}
    return LoraConfig(
        r=int(lora["r"]),
        lora_alpha=int(lora["alpha"]),
        lora_dropout=float(lora["dropout"]),
        target_modules=lora["target_modules"],
        task_type="CAUSAL_LM",
    )


def train(subset_path: str | Path, model_path: str, checkpoint_dir: str | Path, log_out: str | Path,
          manifest_out: str | Path, settings: dict, dataset: dict, seed: int) -> dict:
    """Run (or resume) GRPO on a subset; write the trainer log and a manifest of checkpoints."""
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM
    from trl import GRPOTrainer

    from .generation import load_tokenizer

    checkpoint_dir = Path(checkpoint_dir)
    on_gpu = torch.cuda.is_available()
    s = {**DEFAULTS, **settings}
    tokenizer = load_tokenizer(model_path)
    subset = pd.read_parquet(subset_path)
    train_set = Dataset.from_dict(
        {
            "prompt": prompts.for_dataset(dataset, list(subset["prompt"]), tokenizer),
            "answer": [str(a) for a in subset["answer"]],
            "answer_type": list(subset["answer_type"]),
        }
    )
    grader = dataset.get("grading", {})
    reward = grading.make_reward_function(
        str(subset["answer_type"].iloc[0]), grader.get("mode", "lenient"), grader.get("pattern")
    )
    dtype = torch.bfloat16 if on_gpu and s["bf16"] else torch.float32
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=dtype)
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=reward,
        args=grpo_config(s, checkpoint_dir, seed, on_gpu),
        train_dataset=train_set,
        processing_class=tokenizer,
        peft_config=lora_config(s),
    )
    removed = discard_incomplete(checkpoint_dir)
    if removed:
        log.warning("discarded incomplete checkpoints: %s", ", ".join(map(str, removed)))
    done = checkpoints(checkpoint_dir)
    resume = str(done[-1][1]) if done else None
    if resume:
        log.info("resuming from %s", resume)
    trainer.train(resume_from_checkpoint=resume)

    final_step = trainer.state.global_step
    if not any(step == final_step for step, _ in checkpoints(checkpoint_dir)):
        # max_steps not a multiple of save_steps: keep the final adapter as a checkpoint too.
        trainer._save_checkpoint(trainer.model, trial=None)
    history = pd.DataFrame(trainer.state.log_history)
    history.insert(0, "resumed_from", done[-1][0] if done else 0)
    write_parquet(history, log_out)
    manifest = {
        "model": model_path,
        "resumed_from_step": done[-1][0] if done else 0,
        "final_step": final_step,
        "checkpoints": [{"step": step, "path": str(path)} for step, path in checkpoints(checkpoint_dir)],
    }
    write_json(manifest, manifest_out)
    return manifest

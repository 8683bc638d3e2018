"""GRPO with TRL's ``GRPOTrainer`` and a PEFT LoRA adapter on a selected subset; resumes from its last checkpoint.

Checkpoints live in a folder that is not a Snakemake output and belongs to one run's fingerprint (see
:mod:`grpo_budget.train.checkpoints`); the declared outputs, ``train_log.parquet`` and ``manifest.json``, are
written atomically at the end.
"""

from __future__ import annotations

import logging
import math
import os
from pathlib import Path

import pandas as pd

from grpo_budget import device as devices
from grpo_budget.errors import UserError
from grpo_budget.config import schema
from grpo_budget.config.settings import Training
from grpo_budget.generation import custom_rewards, prompts, rewards
from grpo_budget.generation.backends import load_tokenizer
from grpo_budget.generation.vllm_args import effective_top_k, model_top_k
from grpo_budget.io import read_json, read_parquet, write_json, write_parquet
from grpo_budget.prepare.splits import attach_answers
from grpo_budget.prepare.userrows import cell
from grpo_budget.select.sources import labels_bought
from grpo_budget.train.checkpoints import (adapter_digest, checkpoints, claim_checkpoint_dir, digest_recorder,
                                           discard_incomplete, record_digests, room_to_save)
from grpo_budget.train import objective
from grpo_budget.train.fingerprint import fingerprint
from grpo_budget.train.manifest import recorded
from grpo_budget.train.lora import check_lora_targets, lora_config, resolve_lora_targets
from grpo_budget.train.methods import method_of
from grpo_budget.train.reporting import learnable_share, reporting_env, reporting_package
from grpo_budget.train.schedule import planned_saves, prompts_per_generation, schedule
from grpo_budget.train.trainer import trainer_class
from grpo_budget.train.trainlog import column_recorder, read_columns, whole_run

log = logging.getLogger(__name__)

SUBSET_COLUMNS = ["prompt", "answer", "answer_type"]  # all that training reads from the subset


def train(subset_path: str | Path, model_path: str, checkpoint_dir: str | Path, log_out: str | Path,
          manifest_out: str | Path, t: Training, dataset: dict, seed: int) -> dict:
    """Run (or resume) GRPO on a subset; write the trainer log and a manifest of checkpoints."""
    checkpoint_dir = Path(checkpoint_dir)
    on_gpu = devices.resolve(t.device) == "cuda"
    subset = read_parquet(subset_path)
    subset = attach_answers(subset, dataset, str(subset_path))
    labels = labels_bought(subset)
    subset = subset[SUBSET_COLUMNS + solution_column(subset, t, dataset, subset_path) + function_columns(subset, t, dataset)]
    args = grpo_config(t, checkpoint_dir, seed, on_gpu, n_items=len(subset))
    if t.top_k is None:  # as scoring's null: the model's generation_config value, else transformers' 50
        args.top_k = effective_top_k(None, model_top_k(model_path))
    check_trainable(len(subset), args, t, subset_path)
    preflight(model_path, t)
    _, planned = schedule(len(subset), t, prompts_per_generation(args))  # args.max_steps is its first part
    record = fingerprint(subset, model_path, t, custom_rewards.fingerprinted(dataset, t.rewards), seed)
    claim_checkpoint_dir(checkpoint_dir, record)
    discard_incomplete(checkpoint_dir)
    # Checkpoints past max_steps (a run since shortened) are not resumed from, nor listed as this run's.
    done = [c for c in checkpoints(checkpoint_dir) if c[0] <= args.max_steps]
    resumed_from = done[-1][0] if done else 0
    if resumed_from == args.max_steps:
        # Already trained (e.g. killed after its last save): the Trainer would take one more step past max_steps.
        log.info("checkpoint %s already reaches max_steps: nothing to train", done[-1][1])
        state = read_json(done[-1][1] / "trainer_state.json")
        history, final_step = state["log_history"], state["global_step"]
    else:
        state = None
        history, final_step = _fit(subset, model_path, args, t, dataset, done[-1][1] if done else None, subset_path,
                                   planned, resumed_from)
    history = whole_run(history, resumed_from, state, read_columns(checkpoint_dir))
    history.insert(0, "resumed_from", resumed_from)
    write_parquet(history, log_out)
    saved = [(step, path) for step, path in checkpoints(checkpoint_dir) if step <= final_step]
    missing = sorted(set(planned) - {step for step, _ in saved})
    if missing:
        # Resumed past them: checkpoints of the same trajectory saved on another plan (save_steps, checkpoints).
        log.warning("planned checkpoint steps %s are missing from %s (resumed from step %d, saved under another "
                    "checkpoint plan); the manifest lists the ones there are", missing, checkpoint_dir, resumed_from)
    manifest = {
        "model": recorded(model_path, manifest_out),  # paths in the results folder are {results}/...
        "fingerprint": record["fingerprint"],
        "resumed_from_step": resumed_from,
        "final_step": final_step,
        "planned_checkpoints": planned,
        **({"epochs": t.epochs, "steps_per_epoch": len(subset) // prompts_per_generation(args)
                                                   * method_of(t).updates_per_batch(t)}
           if t.epochs is not None else {}),
        # evaluate checks each adapter against its sha256 before loading it
        "checkpoints": [{"step": step, "path": recorded(path, manifest_out), "sha256": adapter_digest(path)}
                        for step, path in saved],
        "labels_bought": labels,
        "rewards": rewards.check(t.rewards),  # name -> weight, as GRPO summed them
        "objective": objective.used(args),  # the loss-relevant GRPOConfig values, read off the config TRL ran
    }
    write_json(manifest, manifest_out)
    return manifest


def _fit(subset: pd.DataFrame, model_path: str, args, t: Training, dataset: dict, resume: Path | None,
         subset_path: str | Path, planned: list[int], resumed_from: int = 0) -> tuple[list[dict], int]:
    """Train from ``resume`` (or from scratch) to ``args.max_steps``, saving checkpoints at the ``planned`` steps
    and keeping the final adapter as a checkpoint; returns the trainer log and the final step."""
    from datasets import Dataset
    from transformers import AutoModelForCausalLM
    tokenizer = load_tokenizer(model_path)
    train_set = Dataset.from_dict(
        {
            "prompt": prompts.for_dataset(dataset, list(subset["prompt"]), tokenizer),
            "answer": [str(a) for a in subset["answer"]],
            "answer_type": list(subset["answer_type"]),
            "item": list(range(len(subset))),  # dynamic sampling's refills leave out the prompts of their step
            **({"solution": [str(s) for s in subset["solution"]]} if "solution" in subset else {}),
            # your own functions' columns (TRL passes each to the reward functions), as scoring and evaluation do
            **{c: [cell(v) for v in subset[c]] for c in subset.columns if c not in (*SUBSET_COLUMNS, "solution")},
        }
    )
    grader = schema.fill(("datasets", "*", "grading"), dataset.get("grading", {}))
    reward, args.reward_weights = rewards.reward_functions(t.rewards, str(subset["answer_type"].iloc[0]),
                                                           grader["mode"], grader["pattern"], grader.get("function"),
                                                           tuple(custom_rewards.columns_of(subset)))
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=load_dtype(t.dtype, args.bf16))
    targets, layers = resolve_lora_targets(model, t.lora.target_modules, t.lora.layers)
    check_lora_targets(model, targets)
    run_dir = Path(args.output_dir).parent  # the checkpoints folder's parent: the run's folder
    env = reporting_env(t.report_to, run_dir)
    if t.report_to == "wandb":
        args.run_name = str(run_dir)
    saved_env = {k: os.environ.get(k) for k in env}
    os.environ.update(env)  # the reporting callbacks read their folders when the trainer builds them
    try:
        trainer = trainer_class()(
            model=model,
            reward_funcs=reward,
            args=args,
            train_dataset=train_set,
            processing_class=tokenizer,
            peft_config=lora_config(t.lora, targets, layers),
            callbacks=[planned_saves(planned), digest_recorder(), column_recorder(resumed_from)],
            training=t,
        )
        if t.report_to != "none":
            trainer.callback_handler.callbacks.insert(0, learnable_share())
        if resume:
            log.info("resuming from %s", resume)
        with room_to_save(trainer, Path(args.output_dir)):
            trainer.train(resume_from_checkpoint=str(resume) if resume else None)
    finally:
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

    final_step = trainer.state.global_step
    if final_step == 0:
        # Never let an arm that trained nothing look trained downstream.
        raise RuntimeError(f"training on {subset_path} ran zero optimizer steps; no manifest written")
    if not any(step == final_step for step, _ in checkpoints(args.output_dir)):
        # Planned saves end at max_steps; should the Trainer stop short of it, keep the final adapter too.
        with room_to_save(trainer, Path(args.output_dir)):
            trainer._save_checkpoint(trainer.model, trial=None)
        if trainer.is_world_process_zero():  # on_save, which records digests, fires only in the Trainer's own flow
            record_digests(Path(args.output_dir) / f"checkpoint-{final_step}")
    return trainer.state.log_history, final_step


def function_columns(subset: pd.DataFrame, t: Training, dataset: dict) -> list[str]:
    """The data columns your own grading or reward functions are given (none when the run uses none)."""
    if not custom_rewards.refs(dataset, t.rewards):
        return []
    return [c for c in custom_rewards.columns_of(subset) if c not in (*SUBSET_COLUMNS, "solution")] + \
        (["solution"] if "solution" in subset and not method_of(t).needs_solutions else [])


def preflight(model_path: str, t: Training) -> None:
    """Refuse what a config can get wrong that only the job can check (a config that skipped validation, LoRA targets
    on this model's layout) before the run's checkpoint folder is claimed: claiming moves the checkpoints of another
    fingerprint aside, which a run that cannot train must never do. The model is built on the meta device from its
    config: no weights are read."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    rewards.check(t.rewards)
    reporting_package(t.report_to)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(model_path))
    targets, _ = resolve_lora_targets(model, t.lora.target_modules, t.lora.layers)
    check_lora_targets(model, targets)


def solution_column(subset: pd.DataFrame, t: Training, dataset: dict, subset_path) -> list[str]:
    """``["solution"]`` when the run's method reads reference solutions (``guided``), which every selected item must
    have; else ``[]``."""
    if not method_of(t).needs_solutions:
        return []
    has = subset["solution"].map(lambda s: isinstance(s, str) and bool(s.strip())) if "solution" in subset else None
    if has is None or not has.all():
        name = dataset.get("benchmark") or dataset.get("generator") or "this dataset"
        lacking = len(subset) if has is None else int((~has).sum())
        raise UserError(f"training.method is {t.method}, which needs a reference solution per item, but {lacking} "
                        f"of {len(subset)} items of {subset_path} ({name}) have none: map a solution field "
                        "(spec: {fields: {solution: COLUMN}}) or use another training.method")
    return ["solution"]


def load_dtype(dtype: str, bf16: bool):
    """The dtype the policy is loaded in: the model's (``models.NAME.dtype``), or with ``auto`` bfloat16 where
    training runs in bf16 and float32 otherwise (CPU)."""
    import torch

    if dtype == "auto":
        return torch.bfloat16 if bf16 else torch.float32
    return getattr(torch, dtype)


def check_trainable(n_items: int, args, t: Training, subset_path: str | Path) -> None:
    """Refuse settings that could not train a single step, before any model is loaded."""
    need = prompts_per_generation(args)
    if n_items < need:
        raise UserError(
            f"{subset_path} has {n_items} items, but one optimizer step needs {need} distinct prompts "
            f"(training.prompts_per_step = {t.prompts_per_step}): raise the budget to at least {need} "
            f"items or lower training.prompts_per_step to at most {n_items}"
        )
    if int(t.max_steps) < 1:
        raise UserError(f"training.max_steps is {t.max_steps}: set it to 1 or more")
    problem = method_of(t).batch_problem(t, int(args.steps_per_generation))
    if problem:
        raise UserError(problem[1])


def grpo_config(t: Training, out_dir: Path, seed: int, on_gpu: bool, n_items: int | None = None):
    """``GRPOConfig`` from the config's training section (CPU-safe defaults when no GPU is present). Given the
    subset's ``n_items``, ``max_steps`` is the run's length from :func:`grpo_budget.train.schedule.schedule` (``epochs``) and ``save_steps``
    the greatest common divisor of its checkpoint steps (so even the Trainer's own flow saves them all;
    :func:`grpo_budget.train.schedule.planned_saves` drops the rest)."""
    from trl import GRPOConfig

    # Always passed: TRL's GRPOConfig turns checkpointing on by default, which would ignore a configured false.
    # "auto" unresolved (the workflow resolves it from the memory plan on cuda) is off on the CPU, on on a GPU.
    checkpointing = t.gradient_checkpointing
    extra = {"gradient_checkpointing": on_gpu if checkpointing == "auto" else bool(checkpointing)}
    if on_gpu and t.use_vllm:
        if t.vllm_gpu_memory_utilization == "auto":
            raise UserError("training.vllm_gpu_memory_utilization is auto, but this job was given no memory plan: "
                            "run it through the workflow, or set a share (0-1)")
        extra.update(use_vllm=True, vllm_mode=t.vllm_mode, vllm_gpu_memory_utilization=t.vllm_gpu_memory_utilization,
                     vllm_max_model_length=t.vllm_max_model_length, **objective.vllm_settings(t))
    args = GRPOConfig(
        output_dir=str(out_dir),
        per_device_train_batch_size=t.per_device_batch,
        gradient_accumulation_steps=int(t.gradient_accumulation_steps),
        num_generations=int(t.num_generations),
        learning_rate=float(t.learning_rate),
        lr_scheduler_type=t.lr_scheduler_type,
        warmup_steps=float(t.warmup_ratio),  # a float in [0, 1) is a ratio of max_steps
        weight_decay=float(t.weight_decay),
        adam_beta1=float(t.adam_beta1),
        adam_beta2=float(t.adam_beta2),
        max_grad_norm=float(t.max_grad_norm),
        max_steps=int(t.max_steps),
        save_strategy="steps",
        save_steps=int(t.save_steps),
        logging_steps=1,
        max_completion_length=int(t.max_completion_length),
        beta=float(t.beta),
        temperature=float(t.temperature),
        top_p=float(t.top_p),
        top_k=int(t.top_k or 0),  # null is resolved from the model by train()
        loss_type=t.loss_type,
        scale_rewards=t.scale_rewards,
        chat_template_kwargs=t.chat_template_kwargs or None,
        use_cpu=not on_gpu,
        bf16=bool(on_gpu and t.bf16 and t.dtype in ("auto", "bfloat16")),
        fp16=bool(on_gpu and t.dtype == "float16"),
        seed=seed,
        data_seed=seed,
        report_to=t.report_to,
        disable_tqdm=False,
        **extra,
    )
    if n_items is not None and (t.epochs is not None or t.checkpoints is not None):
        # The distinct prompts per step are known only once the config has counted the processes.
        max_steps, steps = schedule(n_items, t, prompts_per_generation(args))
        args.max_steps, args.save_steps = max_steps, math.gcd(*steps)
    return args

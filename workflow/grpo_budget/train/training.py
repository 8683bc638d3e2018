"""GRPO with TRL's ``GRPOTrainer`` and a PEFT LoRA adapter on a selected subset; resumes from its last checkpoint.

Checkpoints live in a folder that is *not* a Snakemake output (Snakemake deletes outputs before it re-runs a
job); the declared outputs, ``log_history.parquet`` and ``manifest.json``, are written atomically at the end.
The folder records the fingerprint of the run that made its checkpoints (``fingerprint.json``): a run with
another fingerprint moves them aside and starts fresh rather than resuming someone else's trajectory.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import math
import os
import re
import struct
import zipfile
from dataclasses import asdict
from pathlib import Path

import pandas as pd

from grpo_budget.digest import model_digest
from grpo_budget.errors import UserError
from grpo_budget.experiment import schema
from grpo_budget.experiment.settings import Training
from grpo_budget.generation import grading, prompts
from grpo_budget.generation.backends import load_tokenizer
from grpo_budget.io import numbered_path, read_json, read_parquet, write_json, write_parquet
from grpo_budget.prepare.splits import attach_answers
from grpo_budget.select.sources import labels_bought

log = logging.getLogger(__name__)

CHECKPOINT_RE = re.compile(r"^checkpoint-(\d+)$")
FINGERPRINT_FILE = "fingerprint.json"
INCOMPLETE_DIR = "incomplete"
SUBSET_COLUMNS = ["prompt", "answer", "answer_type"]  # all that training reads from the subset

OPTIONAL = ("epochs", "checkpoints")  # fields without a default: None when absent


def complete(settings: dict) -> dict:
    """The training settings with the schema's defaults filled in (``settings.Training`` as a dict); a completed
    dict completes to itself (its unset optional fields, None, count as absent)."""
    settings = {k: v for k, v in (settings or {}).items() if not (k in OPTIONAL and v is None)}
    return asdict(Training.from_dict(settings))


def checkpoints(folder: str | Path) -> list[tuple[int, Path]]:
    """Complete checkpoints in ``folder`` as (step, path), oldest first (see ``incomplete_reason``)."""
    return [(step, p) for step, p in _checkpoint_dirs(folder) if incomplete_reason(p) is None]


def _checkpoint_dirs(folder: str | Path) -> list[tuple[int, Path]]:
    folder = Path(folder)
    found = []
    for p in folder.glob("checkpoint-*") if folder.exists() else []:
        m = CHECKPOINT_RE.match(p.name)
        if m and p.is_dir():
            found.append((int(m.group(1)), p))
    return sorted(found)


def incomplete_reason(checkpoint: Path) -> str | None:
    """Why resume or evaluation could not use ``checkpoint`` (None when it is complete).

    Resume needs what HF ``Trainer._load_from_checkpoint`` and ``_load_optimizer_and_scheduler`` load: the adapter
    (``adapter_model.safetensors`` or ``.bin`` beside ``adapter_config.json``), ``optimizer.pt`` and
    ``scheduler.pt`` (the Trainer silently starts a fresh optimizer without them), plus the RNG state and
    ``trainer_state.json``, which the Trainer writes last. ``torch.save`` files are zip archives, so a truncated
    one fails the zip check.
    """
    for name in ("trainer_state.json", "adapter_config.json"):
        try:
            json.loads((checkpoint / name).read_text())
        except (OSError, ValueError):
            return f"{name} missing or unreadable"
    safetensors, pickled = checkpoint / "adapter_model.safetensors", checkpoint / "adapter_model.bin"
    if not (_safetensors_ok(safetensors) or _zip_ok(pickled)):
        return "adapter_model.safetensors (or .bin) missing or unreadable"
    for name in ("optimizer.pt", "scheduler.pt"):
        if not _zip_ok(checkpoint / name):
            return f"{name} missing or unreadable"
    if not any(_zip_ok(p) for p in checkpoint.glob("rng_state*.pth")):
        return "rng_state.pth missing or unreadable"
    return None


def _safetensors_ok(path: Path) -> bool:
    """The header parses and the file is as long as the tensors it declares (a truncated file is not)."""
    try:
        size = path.stat().st_size
        with path.open("rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            if n > size - 8:
                return False
            header = json.loads(f.read(n))
        end = max((v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"), default=0)
        return size == 8 + n + end
    except (OSError, ValueError, struct.error, KeyError, TypeError, IndexError):
        return False


def _zip_ok(path: Path) -> bool:
    return path.is_file() and zipfile.is_zipfile(path)


def discard_incomplete(folder: str | Path) -> list[Path]:
    """Move checkpoint folders that resume could not use (a killed job's half-written one, a deleted file) into
    ``folder/incomplete/``, kept for inspection, so that resuming never reads them; returns their old paths."""
    moved = []
    for _, p in _checkpoint_dirs(folder):
        reason = incomplete_reason(p)
        if reason is None:
            continue
        target = numbered_path(f"{Path(folder) / INCOMPLETE_DIR / p.name}.")
        target.parent.mkdir(exist_ok=True)
        p.rename(target)
        log.warning("checkpoint %s is incomplete (%s): moved it to %s, not resuming from it", p, reason, target)
        moved.append(p)
    return moved


def trajectory_settings(settings: dict) -> dict:
    """The training settings that shape the run up to any given step: all but ``save_steps`` and
    ``checkpoints`` (when to save changes no update) and the run's length, ``max_steps`` or ``epochs``
    (extending a run, as a SLURM requeue or a raised max_steps does, must resume) -- except that the length stays
    in when the learning-rate schedule depends on it (decay, or a warmup given as a ratio of max_steps). With
    ``epochs`` set, ``max_steps`` is ignored, so never counts; unset ``epochs`` is left out, which keeps the
    fingerprints of runs made before the field existed."""
    s = complete(settings)
    schedule = s["lr_scheduler_type"]
    # HF's "constant" schedule ignores warmup; "constant_with_warmup" with no warmup is the same schedule.
    no_warmup = float(s["warmup_ratio"]) == 0
    ignores_max_steps = schedule == "constant" or (schedule == "constant_with_warmup" and no_warmup)
    dropped = {"save_steps", "checkpoints", "max_steps", "epochs"}
    if not ignores_max_steps:
        dropped -= {"epochs"} if s["epochs"] is not None else {"max_steps"}
    # Memory knobs change how a step is computed, not what it computes: lowering them after an out-of-memory
    # failure must resume, not retrain.
    dropped |= {"gradient_checkpointing", "vllm_gpu_memory_utilization"}
    # Where the steps are also logged (TensorBoard, W&B) changes nothing they compute.
    dropped |= {"report_to"}
    if s["lora"].get("layers") is None:  # unset, as before the field existed: the fingerprint stays
        s["lora"] = {k: v for k, v in s["lora"].items() if k != "layers"}
    return {k: v for k, v in s.items() if k not in dropped}


# The parts of a dataset entry that shape training beyond the subset's rows: the prompt and the reward.
DATASET_FINGERPRINT = ("source", "benchmark", "generator", "prompt", "grading")


def subset_digest(subset: pd.DataFrame) -> dict:
    """Hash of the subset's content, not its file: a re-write with the same rows keeps it. Row order counts, since
    TRL's sampler permutes row indices, so reordered rows train a different trajectory."""
    rows = [[str(p), str(a), str(t)] for p, a, t in zip(subset["prompt"], subset["answer"], subset["answer_type"])]
    return {"items": len(rows), "sha256": hashlib.sha256(json.dumps(rows).encode()).hexdigest()}


def fingerprint(subset: pd.DataFrame, model_path: str, settings: dict, dataset: dict, seed: int) -> dict:
    """``{"fingerprint": hash, "parts": {...}}`` of everything that determines the training trajectory: subset
    content, model, trajectory settings, the dataset's prompt and grading (they shape the reward) and the seed."""
    parts = {
        "subset": subset_digest(subset),
        "model": model_digest(model_path),
        "training": trajectory_settings(settings),
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


def claim_checkpoint_dir(checkpoint_dir: Path, record: dict) -> Path | None:
    """Make ``checkpoint_dir`` belong to the run with fingerprint ``record``: checkpoints of another run (or of
    an unknown one: no readable fingerprint file) are moved aside whole to ``<dir>.stale-N``, never deleted.
    Returns where they went, or None."""
    try:
        old = read_json(checkpoint_dir / FINGERPRINT_FILE)
    except (OSError, ValueError):
        old = None
    if isinstance(old, dict) and old.get("fingerprint") == record["fingerprint"]:
        return None
    moved = None
    if checkpoint_dir.is_dir() and any(p.name != FINGERPRINT_FILE for p in checkpoint_dir.iterdir()):
        moved = numbered_path(f"{checkpoint_dir}.stale-")
        checkpoint_dir.rename(moved)
        if isinstance(old, dict):
            why = f"{', '.join(differing_parts(old.get('parts') or {}, record['parts'])) or 'fingerprint'} changed"
        else:
            why = f"it has no readable {FINGERPRINT_FILE}"
        log.warning("checkpoints in %s come from a different run (%s): moved them to %s; training starts fresh "
                    "from step 0", checkpoint_dir, why, moved)
    write_json(record, checkpoint_dir / FINGERPRINT_FILE)
    return moved


def prompts_per_generation(args) -> int:
    """Distinct prompts one optimizer step draws: TRL's ``RepeatSampler`` takes the subset in chunks of
    ``generation_batch_size // num_generations`` prompts and drops a final short chunk, so a smaller subset
    yields no batch at all (and the Trainer silently runs zero steps)."""
    return args.generation_batch_size // args.num_generations


def default_prompts_per_step(settings: dict) -> int:
    """``prompts_per_generation`` of ``grpo_config(settings)`` on one process, without building it."""
    s = complete(settings)
    accumulation, generations = int(s["gradient_accumulation_steps"]), int(s["num_generations"])
    return int(s["prompts_per_step"]) * generations // accumulation * accumulation // generations


def _half_up(x: float) -> int:
    """``x`` rounded to the nearest integer, halves up (2.5 -> 3; Python's ``round`` would give 2); rounding to 9
    decimals first keeps float noise such as 0.29 * 50 = 14.499999999999998 from deciding the side."""
    return math.floor(round(x, 9) + 0.5)


def schedule(n_items: int, settings: dict, per_step_prompts: int | None = None) -> tuple[int, list[int]]:
    """``(max_steps, checkpoint steps)`` of a run on ``n_items`` subset items (pure arithmetic).

    Without ``epochs``: the configured ``max_steps``. With it: ``max(1, epochs * steps_per_epoch)`` rounded to the
    nearest step, halves up, where ``steps_per_epoch = n_items // per_step_prompts`` (TRL's ``RepeatSampler``
    drops a short final chunk) and ``per_step_prompts`` is the distinct prompts one optimizer step draws
    (``prompts_per_generation(args)``; by default ``default_prompts_per_step(settings)``).

    Checkpoints: with ``checkpoints`` = n set, steps ``round(max_steps * i / n)`` for i = 1..n, halves up, the
    duplicates and zeros of a short run dropped; otherwise, without ``epochs``, every ``save_steps``-th step as the
    Trainer saves them, plus ``max_steps`` when it is not a multiple; with ``epochs`` but no ``checkpoints``, the
    final step only. The last checkpoint is always ``max_steps``.
    """
    s = complete(settings)
    if s["epochs"] is None:
        max_steps = int(s["max_steps"])
    else:
        per_step = default_prompts_per_step(s) if per_step_prompts is None else int(per_step_prompts)
        max_steps = max(1, _half_up(float(s["epochs"]) * (n_items // per_step)))
    n = s["checkpoints"]
    if n is not None:
        n = int(n)
        steps = [(2 * max_steps * i + n) // (2 * n) for i in range(1, n + 1)]  # exact half-up rounding
    elif s["epochs"] is None:
        steps = list(range(int(s["save_steps"]), max_steps + 1, int(s["save_steps"])))
    else:
        steps = []
    steps = sorted({step for step in steps if step >= 1} | {max_steps})
    return max_steps, steps


def planned_saves(steps: list[int]):
    """A ``TrainerCallback`` that saves at exactly ``steps``: run after the Trainer's ``DefaultFlowCallback``, it
    overrides that callback's every-``save_steps`` decision at each step's end."""
    from transformers import TrainerCallback

    planned = frozenset(steps)

    class PlannedSaves(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            control.should_save = state.global_step in planned
            return control

    return PlannedSaves()


def check_trainable(n_items: int, args, settings: dict, subset_path: str | Path) -> None:
    """Refuse settings that could not train a single step, before any model is loaded."""
    need = prompts_per_generation(args)
    if n_items < need:
        raise UserError(
            f"{subset_path} has {n_items} items, but one optimizer step needs {need} distinct prompts "
            f"(training.prompts_per_step = {settings['prompts_per_step']}): raise the budget to at least {need} "
            f"items or lower training.prompts_per_step to at most {n_items}"
        )
    if int(settings["max_steps"]) < 1:
        raise UserError(f"training.max_steps is {settings['max_steps']}: set it to 1 or more")


def grpo_config(settings: dict, out_dir: Path, seed: int, on_gpu: bool, n_items: int | None = None):
    """``GRPOConfig`` from the config's training section (CPU-safe defaults when no GPU is present). Given the
    subset's ``n_items``, ``max_steps`` is the run's length from :func:`schedule` (``epochs``) and ``save_steps``
    the greatest common divisor of its checkpoint steps (so even the Trainer's own flow saves them all;
    :func:`planned_saves` drops the rest)."""
    from trl import GRPOConfig

    s = complete(settings)
    per_device = int(s["prompts_per_step"]) * int(s["num_generations"]) // int(s["gradient_accumulation_steps"])
    extra = {}
    if on_gpu and s["gradient_checkpointing"]:
        extra["gradient_checkpointing"] = True
    if on_gpu and s["use_vllm"]:
        extra.update(use_vllm=True, vllm_mode=s["vllm_mode"], vllm_gpu_memory_utilization=s["vllm_gpu_memory_utilization"])
    args = GRPOConfig(
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
        chat_template_kwargs=s["chat_template_kwargs"] or None,
        use_cpu=not on_gpu,
        bf16=bool(on_gpu and s["bf16"]),
        seed=seed,
        data_seed=seed,
        report_to=s["report_to"],
        disable_tqdm=False,
        **extra,
    )
    if n_items is not None and (s["epochs"] is not None or s["checkpoints"] is not None):
        # The distinct prompts per step are known only once the config has counted the processes.
        max_steps, steps = schedule(n_items, s, prompts_per_generation(args))
        args.max_steps, args.save_steps = max_steps, math.gcd(*steps)
    return args


REPORT_DIRS = {"tensorboard": "tb", "wandb": "wandb"}  # report_to -> its folder in the run's folder


def reporting_env(report_to: str, run_dir: Path) -> dict[str, str]:
    """Environment for TRL's ``report_to``: TensorBoard event files in ``run_dir/tb`` (``tensorboard --logdir
    results/`` then finds every arm), W&B offline in ``run_dir/wandb`` (``wandb sync`` uploads it later)."""
    if report_to == "none":
        return {}
    if importlib.util.find_spec(report_to) is None:
        raise UserError(f"training.report_to is {report_to}, but the {report_to} package is not installed: "
                        f"pip install {report_to}, or set training.report_to: none")
    folder = run_dir / REPORT_DIRS[report_to]
    folder.mkdir(parents=True, exist_ok=True)
    if report_to == "tensorboard":
        return {"TENSORBOARD_LOGGING_DIR": str(folder)}
    return {"WANDB_MODE": os.environ.get("WANDB_MODE", "offline"), "WANDB_DIR": str(folder),
            "WANDB_PROJECT": os.environ.get("WANDB_PROJECT", "grpo-budget")}


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


def lora_config(settings: dict, target_modules=None, layers: list[int] | None = None):
    """PEFT's ``LoraConfig``; ``target_modules`` and ``layers`` as :func:`resolve_lora_targets` gives them (by
    default the settings' own target modules on every layer)."""
    from peft import LoraConfig

    lora = complete(settings)["lora"]
    extra = {"layers_to_transform": list(layers), "layers_pattern": "layers"} if layers is not None else {}
    return LoraConfig(
        r=int(lora["r"]),
        lora_alpha=int(lora["alpha"]),
        lora_dropout=float(lora["dropout"]),
        target_modules=lora["target_modules"] if target_modules is None else target_modules,
        task_type="CAUSAL_LM",
        **extra,
    )


# Named groups of LoRA target modules: the linear layers under this submodule of every decoder layer (the names of
# Llama, Qwen2/3, Mistral and Phi-3 layouts alike: q/k/v/o_proj or a fused qkv_proj under self_attn; gate/up/down_proj
# or a fused gate_up_proj under mlp). all-linear: every linear layer of the decoder layers.
LORA_GROUPS = {"attention": "self_attn", "mlp": "mlp"}
ALL_LINEAR = "all-linear"


def _decoder_layers(model) -> tuple[str, int]:
    """The path of the model's list of decoder layers (``model.layers``) and how many there are."""
    import torch

    found = [(name, len(m)) for name, m in model.named_modules()
             if isinstance(m, torch.nn.ModuleList) and name.rsplit(".", 1)[-1] == "layers" and len(m)]
    if not found:
        raise UserError(f"{type(model).__name__} has no list of decoder layers named 'layers': LoRA groups "
                        f"({', '.join(LORA_GROUPS)}) and training.lora.layers need one; list module names instead")
    return found[0]


def _layer_linears(model) -> list[str]:
    """The linear layers of the decoder layers, as paths inside one layer (``self_attn.q_proj``), in model order."""
    import torch
    from transformers.pytorch_utils import Conv1D

    prefix, _ = _decoder_layers(model)
    out = []
    for name, module in model.named_modules():
        if name.startswith(prefix + ".") and isinstance(module, (torch.nn.Linear, Conv1D)):
            inner = name[len(prefix) + 1:].split(".", 1)
            if len(inner) == 2 and inner[0].isdigit():
                out.append(inner[1])
    return list(dict.fromkeys(out))


def resolve_lora_targets(model, target_modules, layers: list[int] | None = None):
    """PEFT's ``target_modules`` and ``layers_to_transform`` for the configured targets on ``model``.

    ``target_modules``: a list of module names and named groups, or one name or group: ``attention`` (the linear
    layers under each decoder layer's ``self_attn``), ``mlp`` (under ``mlp``), ``all-linear``. ``layers``:
    ``[start, end]`` of the decoder layers to adapt (0-based, both included), or None for all. Groups become the
    model's own module names (so Phi-3's fused ``qkv_proj`` is what ``attention`` means there). A plain string
    other than a group without ``layers`` (``all-linear``, a regex) goes to PEFT unchanged, as before groups existed.
    """
    names = [target_modules] if isinstance(target_modules, str) else list(target_modules)
    groups = [n for n in names if n in LORA_GROUPS or n == ALL_LINEAR]
    if isinstance(target_modules, str) and layers is None and target_modules not in LORA_GROUPS:
        return target_modules, None
    if isinstance(target_modules, str) and not groups:
        raise UserError(f"training.lora.target_modules {target_modules!r} is a single pattern, which PEFT cannot "
                        "restrict to training.lora.layers; allowed with layers: a list of module names, "
                        f"{', '.join(LORA_GROUPS)} or {ALL_LINEAR}")
    transform = None
    if layers is not None:
        _, n_layers = _decoder_layers(model)
        start, end = (int(x) for x in layers)
        if not 0 <= start <= end < n_layers:
            raise UserError(f"training.lora.layers {list(layers)} is not a range of this model's {n_layers} decoder "
                            f"layers; allowed: [start, end] with 0 <= start <= end <= {n_layers - 1}")
        transform = list(range(start, end + 1))
    resolved: list[str] = []
    if groups:
        linears = _layer_linears(model)
        for n in names:
            if n == ALL_LINEAR:
                resolved += [p.rsplit(".", 1)[-1] for p in linears]
            elif n in LORA_GROUPS:
                mine = [p.rsplit(".", 1)[-1] for p in linears if p.startswith(LORA_GROUPS[n] + ".")]
                if not mine:
                    raise UserError(f"LoRA group {n!r} matches no linear layer under {LORA_GROUPS[n]} in the decoder "
                                    f"layers of {type(model).__name__}, whose linear layers are "
                                    f"{', '.join(linears) or '(none)'}: fix training.lora.target_modules")
                resolved += mine
            else:
                resolved.append(n)
    else:
        resolved = names
    return list(dict.fromkeys(resolved)), transform


def check_lora_targets(model, target_modules) -> None:
    """Refuse LoRA ``target_modules`` names that match no module of ``model``, before training.

    PEFT adapts the modules whose full name equals a listed name or ends with ``"." + name`` and, as long as one
    name matches something, silently skips the rest: Llama-style names on a Phi-3 layout (fused ``qkv_proj`` and
    ``gate_up_proj``, e.g. microsoft/phi-4) would adapt only ``o_proj`` and ``down_proj``. A string (such as
    ``"all-linear"``) is left to PEFT.
    """
    if isinstance(target_modules, str):
        return
    import torch
    from transformers.pytorch_utils import Conv1D  # GPT-2's linear layer

    names = [name for name, _ in model.named_modules() if name]
    missing = [t for t in dict.fromkeys(target_modules)
               if not any(n == t or n.endswith(f".{t}") for n in names)]
    if not missing:
        return
    linear = sorted({name.rsplit(".", 1)[-1] for name, module in model.named_modules()
                     if name and isinstance(module, (torch.nn.Linear, Conv1D))})
    path = getattr(getattr(model, "config", None), "_name_or_path", "")
    model_name = f"{path} ({type(model).__name__})" if path else type(model).__name__
    raise UserError(
        f"LoRA target modules {', '.join(missing)} match no module of {model_name}, and PEFT would silently "
        f"skip them; its linear layers are "
        f"{', '.join(linear) or '(none)'}: fix training.lora.target_modules (or use all-linear)"
    )


def train(subset_path: str | Path, model_path: str, checkpoint_dir: str | Path, log_out: str | Path,
          manifest_out: str | Path, settings: dict, dataset: dict, seed: int) -> dict:
    """Run (or resume) GRPO on a subset; write the trainer log and a manifest of checkpoints."""
    import torch

    checkpoint_dir = Path(checkpoint_dir)
    on_gpu = torch.cuda.is_available()
    s = complete(settings)
    subset = read_parquet(subset_path)
    subset = attach_answers(subset, dataset, str(subset_path))
    labels = labels_bought(subset)
    subset = subset[SUBSET_COLUMNS]
    args = grpo_config(s, checkpoint_dir, seed, on_gpu, n_items=len(subset))
    check_trainable(len(subset), args, s, subset_path)
    _, planned = schedule(len(subset), s, prompts_per_generation(args))  # args.max_steps is its first part
    record = fingerprint(subset, model_path, s, dataset, seed)
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
        history, final_step = _fit(subset, model_path, args, s, dataset, done[-1][1] if done else None, subset_path,
                                   planned)
    history = pd.DataFrame(history)
    history.insert(0, "resumed_from", resumed_from)
    write_parquet(history, log_out)
    saved = [(step, path) for step, path in checkpoints(checkpoint_dir) if step <= final_step]
    missing = sorted(set(planned) - {step for step, _ in saved})
    if missing:
        # Resumed past them: checkpoints of the same trajectory saved on another plan (save_steps, checkpoints).
        log.warning("planned checkpoint steps %s are missing from %s (resumed from step %d, saved under another "
                    "checkpoint plan); the manifest lists the ones there are", missing, checkpoint_dir, resumed_from)
    manifest = {
        "model": model_path,
        "fingerprint": record["fingerprint"],
        "resumed_from_step": resumed_from,
        "final_step": final_step,
        "planned_checkpoints": planned,
        **({"epochs": s["epochs"], "steps_per_epoch": len(subset) // prompts_per_generation(args)}
           if s["epochs"] is not None else {}),
        "checkpoints": [{"step": step, "path": str(path)} for step, path in saved],
        "labels_bought": labels,
    }
    write_json(manifest, manifest_out)
    return manifest


def _fit(subset: pd.DataFrame, model_path: str, args, s: dict, dataset: dict, resume: Path | None,
         subset_path: str | Path, planned: list[int]) -> tuple[list[dict], int]:
    """Train from ``resume`` (or from scratch) to ``args.max_steps``, saving checkpoints at the ``planned`` steps
    and keeping the final adapter as a checkpoint; returns the trainer log and the final step."""
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM
    from trl import GRPOTrainer


    tokenizer = load_tokenizer(model_path)
    train_set = Dataset.from_dict(
        {
            "prompt": prompts.for_dataset(dataset, list(subset["prompt"]), tokenizer),
            "answer": [str(a) for a in subset["answer"]],
            "answer_type": list(subset["answer_type"]),
        }
    )
    grader = schema.fill(("datasets", "*", "grading"), dataset.get("grading", {}))
    reward = grading.make_reward_function(str(subset["answer_type"].iloc[0]), grader["mode"], grader["pattern"])
    dtype = torch.bfloat16 if args.bf16 else torch.float32
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=dtype)
    targets, layers = resolve_lora_targets(model, s["lora"]["target_modules"], s["lora"].get("layers"))
    check_lora_targets(model, targets)
    run_dir = Path(args.output_dir).parent  # the checkpoints folder's parent: the run's folder
    env = reporting_env(s["report_to"], run_dir)
    if s["report_to"] == "wandb":
        args.run_name = str(run_dir)
    saved_env = {k: os.environ.get(k) for k in env}
    os.environ.update(env)  # the reporting callbacks read their folders when the trainer builds them
    try:
        trainer = GRPOTrainer(
            model=model,
            reward_funcs=reward,
            args=args,
            train_dataset=train_set,
            processing_class=tokenizer,
            peft_config=lora_config(s, targets, layers),
            callbacks=[planned_saves(planned)],
        )
        if s["report_to"] != "none":
            trainer.callback_handler.callbacks.insert(0, learnable_share())
        if resume:
            log.info("resuming from %s", resume)
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
        trainer._save_checkpoint(trainer.model, trial=None)
    return trainer.state.log_history, final_step

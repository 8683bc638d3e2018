"""The memory plan of a config (:mod:`grpo_budget.cluster.memory` per job): every GPU rule of every model on the
configured card, checked before any job starts, and the job settings it resolves (``auto`` memory settings, vLLM's
context length, the device and the model's dtype). On device cpu it sizes the training jobs (the only ones that
need gigabytes there) against this machine's memory."""

from __future__ import annotations

import os

from grpo_budget.cluster.memory import Budget, check, plan_generate, plan_train
from grpo_budget.cluster.memory_fix import smallest_fit
from grpo_budget.cluster.shapes import Shape, load_shape
from grpo_budget.errors import UserError
from grpo_budget.experiment import plan, sweep
from grpo_budget.experiment.settings import Generation, Gpu, Training


def model_shape(config: dict, name: str) -> Shape | None:
    """A configured model's shapes: a bootstrapped model's from its settings, any other's from its config.json."""
    spec = config["models"][name]
    if "bootstrap" in spec:
        return None  # the embedded tiny model: megabytes, never the limit
    if "gguf" in spec:  # known once converted (`snakemake results/models/NAME` converts it alone)
        return load_shape(plan.model_path(config, name), None)
    return load_shape(spec["path"], config.get("model_store"))


def unknown(config: dict) -> list[str]:
    """Models the plan cannot size (no config.json anywhere it looks)."""
    return [m for m, spec in config["models"].items() if "bootstrap" not in spec and model_shape(config, m) is None]


def host_memory_gib() -> float:
    """This machine's memory, which the training jobs of device cpu share."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30


def card(config: dict) -> Gpu:
    """What a job is sized for: the configured card on cuda, this machine's memory on cpu."""
    gpu = Gpu.from_dict(config["gpu"])
    return gpu if config["device"] == "cuda" else Gpu(host_memory_gib(), gpu.max_prompt_tokens)


def _train_budget(config: dict, model: str, shape: Shape, variant: str | None) -> Budget:
    t = Training.from_dict(plan.training_settings(config, model, variant))
    return plan_train(model, shape, t, card(config), config["models"][model]["dtype"], _on_vllm(config, t),
                      config["device"])


def _on_vllm(config: dict, t: Training) -> bool:
    return t.use_vllm and config["device"] == "cuda"  # TRL's colocate vLLM needs a GPU; on cpu training generates


def _generate_budget(config: dict, model: str, shape: Shape, rule: str, section: str,
                     evalset: str | None) -> Budget:
    g = Generation.from_dict(plan.generation_settings(config, section, model, evalset), section)
    adapters = rule in ("evaluate", "drift")  # they load the arms' LoRA adapters
    return plan_generate(model, rule, shape, Gpu.from_dict(config["gpu"]), config["models"][model]["dtype"],
                         g.backend, g.batch_size, g.max_new_tokens, g.backend_kwargs,
                         g.max_lora_rank if adapters else 0)


def budgets(config: dict) -> list[Budget]:
    """Every GPU rule of every model the plan can size (the largest job of each rule: the longest completions,
    every sweep variant), in pipeline order; on device cpu the training job of each trained model."""
    trained = set(plan.trained_models(config))
    if config["device"] != "cuda":
        sized = [(m, model_shape(config, m)) for m in plan.trained_models(config)]
        return [max((_train_budget(config, m, shape, v) for v in sweep.names(config) or [None]), key=lambda b: b.total)
                for m, shape in sized if shape is not None]
    out = []
    for model in plan.scored_models(config) + [m for m in trained if m not in plan.scored_models(config)]:
        shape = model_shape(config, model)
        if shape is None:
            continue
        rules: list[Budget] = [_generate_budget(config, model, shape, "score", "scoring", None)]
        if plan.verifies(config) and model in trained:
            rules.append(_generate_budget(config, model, shape, "verify", "verify", None))
        if model in trained:
            rules.append(max((_train_budget(config, model, shape, v) for v in sweep.names(config) or [None]),
                             key=lambda b: b.total))
            sets = sorted({e for d in plan.trainable_datasets(config) for e in plan.evalsets(config, d)})
            for rule in ("evaluate_base", "evaluate"):
                rules.append(max((_generate_budget(config, model, shape, rule, "evaluation", e) for e in sets),
                                 key=lambda b: b.total))
            if model in plan.drift_models(config):
                rules.append(_generate_budget(config, model, shape, "drift", "scoring", None))
        out += rules
    return out


def job_training(config: dict, model: str, settings: dict) -> dict:
    """A training job's settings with the config's device, the model's dtype and the memory plan's checkpointing
    (and, on cuda, vLLM share and context length) in place of ``auto``."""
    s = dict(settings, device=config["device"], dtype=config["models"][model]["dtype"])
    shape = model_shape(config, model)
    if shape is None:
        if s.get("gradient_checkpointing") == "auto":
            s["gradient_checkpointing"] = config["device"] == "cuda"  # unsized: the safe side
        return s
    t = Training.from_dict(s)
    b = plan_train(model, shape, t, card(config), s["dtype"], _on_vllm(config, t), config["device"])
    return dict(s, **b.settings)


def job_generation(config: dict, model: str, settings: dict) -> dict:
    """A scoring or evaluation job's settings with the config's device, the model's dtype and, on cuda, the memory
    plan's context length for vLLM (``max_model_len``, unless backend_kwargs set it) or batch for transformers."""
    s = dict(settings, device=config["device"], dtype=config["models"][model]["dtype"])
    shape = model_shape(config, model) if config["device"] == "cuda" and s.get("backend") == "transformers" else None
    if shape is not None:
        b = plan_generate(model, "generate", shape, Gpu.from_dict(config["gpu"]), s["dtype"], "transformers",
                          int(s["batch_size"]), int(s["max_new_tokens"]), {}, 0)
        s["batch_size"] = b.settings["batch_size"]
    if config["device"] == "cuda" and s.get("backend") == "vllm" and "max_model_len" not in s["backend_kwargs"]:
        seq = Gpu.from_dict(config["gpu"]).max_prompt_tokens + int(s["max_new_tokens"])
        s["backend_kwargs"] = dict(s["backend_kwargs"], max_model_len=seq)
    return s


def check_config(config: dict) -> list[Budget]:
    """The memory plan of a config, refused in one line when a model cannot be sized (cuda) or a job does not fit.
    On cpu an unsized model (a GGUF not yet converted) is checked by its training job when it starts."""
    missing = unknown(config)
    if missing and config["device"] == "cuda":
        raise UserError(f"models {', '.join(missing)}: no config.json in the model folder, model_store, the hub cache "
                        "or cluster/model_configs/, so the memory plan cannot size their GPU jobs: run `grpo-budget "
                        "fetch-models --configfile CONFIG` where the hub is reachable (or set device: cpu)")
    out = budgets(config)
    for b in out:
        if not b.fits and b.rule == "train" and not b.problem:  # name the settings that fit, not one step towards them
            b.note = _fix(config, b.model)
    check(out)
    return out


def _fix(config: dict, model: str) -> str:
    """The smallest change that fits, for the largest training job of ``model`` (every sweep variant)."""
    shape, gpu, dtype = model_shape(config, model), card(config), config["models"][model]["dtype"]
    variants = [Training.from_dict(plan.training_settings(config, model, v)) for v in sweep.names(config) or [None]]
    t = max(variants, key=lambda t: plan_train(model, shape, t, gpu, dtype, _on_vllm(config, t), config["device"]).total)
    return smallest_fit(model, shape, t, gpu, dtype, _on_vllm(config, t), config["device"])

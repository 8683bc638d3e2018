"""Every job of the workflow, and one builder per kind of job: a training job's complete settings, a generating
job's, each with the memory plan's estimate of it (:mod:`grpo_budget.cluster.memory`). The rule files, the cost
plan, the memory plan and the GPU check all take a job's settings from here; nothing else assembles them.

A job's settings are what its rule passes as ``--settings`` and records: its config section (a sweep variant's),
the model's chat-template arguments, the config's device, the model's dtype, and the memory plan's choices in place
of ``auto`` (checkpointing, vLLM's share and context length, a transformers batch that fits). A training job leaves
out other methods' settings and what :data:`grpo_budget.config.records.TRAINING_JOB` names, so the records of runs
made before those fields existed stay valid."""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cached_property

from grpo_budget.aggregate.run import OUTPUTS, built
from grpo_budget.cluster.memory import Budget, plan_generate, plan_train
from grpo_budget.cluster.shapes import Shape, load_shape
from grpo_budget.config import records
from grpo_budget.config.settings import Generation, Gpu, Training
from grpo_budget.experiment import plan, sweep
from grpo_budget.experiment.rules import RULES, TRAIN
from grpo_budget.train.methods import method_of, others_settings

SELECTION_ONLY = ("difficulty", "proxy")  # scoring fields that choose what selection reads, not how samples are drawn


@dataclass(frozen=True)
class JobSettings:
    rule: str
    model: str
    settings: dict  # what the job's --settings carries (and its record holds)
    budget: Budget | None  # the memory plan's estimate (None: a job the plan does not size)

    @cached_property
    def training(self) -> Training:
        return Training.from_dict(self.settings)

    @cached_property
    def generation(self) -> Generation:
        return Generation.from_dict(self.settings, RULES[self.rule].section)


# ---------------------------------------------------------------------------------------------------------------
# The models and the card, as the memory plan sizes them


def model_shape(config: dict, name: str) -> Shape | None:
    """A configured model's shapes: a bootstrapped model's from its settings, any other's from its config.json."""
    spec = config["models"][name]
    if "bootstrap" in spec:
        return None  # the embedded tiny model: megabytes, never the limit
    if "gguf" in spec:  # known once converted (`snakemake results/models/NAME` converts it alone)
        return load_shape(plan.model_path(config, name), None)
    return load_shape(spec["path"], config.get("model_store"))


def host_memory_gib() -> float:
    """This machine's memory, which the training jobs of device cpu share."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30


def card(config: dict) -> Gpu:
    """What a training job is sized for: the configured card on cuda, this machine's memory on cpu."""
    gpu = Gpu.from_dict(config["gpu"])
    return gpu if config["device"] == "cuda" else Gpu(host_memory_gib(), gpu.max_prompt_tokens)


# ---------------------------------------------------------------------------------------------------------------
# One builder per kind of job


def training_job(config: dict, model: str, variant: str | None = None) -> JobSettings:
    """A training job's settings: the training section (a sweep variant's) with its method's own settings only,
    the model's chat-template arguments, the device, the dtype, and the memory plan's checkpointing (and, on cuda,
    vLLM's share and context length) in place of ``auto``; an unsized model takes the safe side."""
    s = training_section(config, model, variant)
    shape = model_shape(config, model)
    if shape is None:
        if s.get("gradient_checkpointing") == "auto":
            s["gradient_checkpointing"] = config["device"] == "cuda"  # unsized: the safe side
        return JobSettings("train", model, s, None)
    t = Training.from_dict(s)
    b = plan_train(model, shape, t, card(config), s["dtype"], on_vllm(config, t), config["device"],
                   method_of(t).micro_batch(t))
    return JobSettings("train", model, dict(s, **b.settings), b)


def training_section(config: dict, model: str, variant: str | None = None) -> dict:
    """A training job's settings before the memory plan fills in what it chooses (``auto`` still ``auto``)."""
    section = sweep.training_of(config, variant)
    others = others_settings(section["method"])
    s = dict({k: v for k, v in section.items() if k not in others}, **_template_kwargs(config, model),
             device=config["device"], dtype=config["models"][model]["dtype"])
    return records.left_out(s, records.TRAINING_JOB)  # with the device, which says whether vLLM is used


def on_vllm(config: dict, t: Training) -> bool:
    """Whether training generates with vLLM: TRL's colocate vLLM needs a GPU; on cpu training generates itself."""
    return t.use_vllm and config["device"] == "cuda"


def generation_job(config: dict, rule: str, model: str, evalset: str | None = None) -> JobSettings:
    """A scoring, verification, evaluation or drift job's settings: its section's sampling (verify: the scoring sampling
    with its own count and seed; an evaluation-only set: the ``ood_*`` sampling), the backend, the model's
    chat-template arguments and LoRA rank bound, the device, the dtype, and on cuda the memory plan's context
    length for vLLM (``max_model_len``, unless backend_kwargs set it) or batch for transformers."""
    s = dict(_sampling(config, rule, evalset), **_template_kwargs(config, model), device=config["device"],
             dtype=config["models"][model]["dtype"])
    if config["device"] != "cuda":
        return JobSettings(rule, model, s, None)
    gpu = Gpu.from_dict(config["gpu"])
    if s["backend"] == "vllm" and "max_model_len" not in s["backend_kwargs"]:
        s["backend_kwargs"] = dict(s["backend_kwargs"], max_model_len=gpu.max_prompt_tokens + int(s["max_new_tokens"]))
    shape = model_shape(config, model)
    if shape is None:
        return JobSettings(rule, model, s, None)
    g = Generation.from_dict(s, RULES[rule].section)
    b = plan_generate(model, rule, shape, gpu, s["dtype"], g.backend, g.batch_size, g.max_new_tokens,
                      g.backend_kwargs, g.max_lora_rank if RULES[rule].loads_adapters else 0)
    if s["backend"] == "transformers":
        s["batch_size"] = b.settings["batch_size"]
    return JobSettings(rule, model, s, b)


def job_settings(config: dict, rule: str, wildcards: dict) -> JobSettings:
    """The settings of the job of ``rule`` (a training or generating rule) at ``wildcards``."""
    if RULES[rule].kind == TRAIN:
        return training_job(config, wildcards["model"], wildcards.get("variant"))
    return generation_job(config, rule, wildcards["model"], wildcards.get("evalset"))


def _sampling(config: dict, rule: str, evalset: str | None) -> dict:
    section = RULES[rule].section
    if rule == "verify":  # the scoring sampling, with fresh samples: its own count and seed
        sc = config["scoring"]
        s = dict(sc, num_samples=sc["verify_samples"], seed=sc["verify_seed"])
    else:
        s = dict(config[section])
    # Adaptive rounds are the pool's scoring only: verification draws a fixed count of fresh samples.
    s = {k: v for k, v in s.items() if not k.startswith("verify_") and not (rule == "verify" and k == "adaptive")
         and k not in SELECTION_ONLY}
    if evalset and config["datasets"][evalset]["eval_only"]:
        for key in ("num_samples", "max_new_tokens"):
            s[key] = s.get(f"ood_{key}", s[key])
    s = {k: v for k, v in s.items() if not k.startswith("ood_")}
    if config["backend"] == "vllm":  # vLLM sizes its LoRA slots up front; other backends need no bound
        ranks = [config["training"]["lora"]["r"], *sweep.axes(config).get("training.lora.r", [])]
        s["max_lora_rank"] = max(ranks)
    return dict(s, backend=config["backend"], backend_kwargs=config["backend_kwargs"])


def _template_kwargs(config: dict, model: str) -> dict:
    """The model's ``chat_template_kwargs`` where it has them (absent otherwise, so job settings stay minimal)."""
    return {k: v for k, v in config["models"][model].items() if k == "chat_template_kwargs"}


# ---------------------------------------------------------------------------------------------------------------
# Every job


def every_job(config: dict) -> list[tuple[str, dict]]:
    """Every job of the workflow as (rule, wildcards), from the plan's grid, in pipeline order: the one list the
    cost plan counts and the memory plan sizes."""
    out: list[tuple[str, dict]] = []
    for d in config["datasets"]:
        out += [("prepare", dict(dataset=d, split=s))
                for s in (["test"] if config["datasets"][d]["eval_only"] else ["pool", "test"])]
    trainable = plan.trainable_datasets(config)
    scored, trained = plan.scored_models(config), plan.trained_models(config)
    used = [m for m in config["models"] if m in scored or m in trained]
    for m in used:
        if "bootstrap" in config["models"][m]:
            out.append(("bootstrap_model", dict(model=m)))
        if "gguf" in config["models"][m]:
            out.append(("convert_gguf", dict(model=m)))
    for m in used:
        for d in trainable:
            if m in scored:
                out.append(("score", dict(model=m, dataset=d)))
            if plan.verifies(config) and m in trained:
                out.append(("verify", dict(model=m, dataset=d)))
        for e in sorted({e for d in trainable for e in plan.evalsets(config, d)} if m in trained else ()):
            out.append(("evaluate_base", dict(model=m, evalset=e)))
    out += [("select", r) for r in plan.grid(config)]
    for r in plan.training_runs(config):
        out.append(("train", r))
        out += [("evaluate", dict(r, evalset=e)) for e in plan.evalsets(config, r["dataset"])]
        if r["model"] in plan.drift_models(config):  # the subset scored again, as the pool was (analysis.drift)
            out.append(("drift", r))
    out.append(("summary", {}))
    # An aggregate output's kind is the rule that builds it.
    out += [(OUTPUTS[n].kind, dict(name=n)) for n in built(config) if OUTPUTS[n].kind != "summary"]
    return out

"""The memory plan of a config (:mod:`grpo_budget.cluster.memory` per job): every GPU job of the workflow sized on the
configured card by the builder that makes its settings (:mod:`grpo_budget.cluster.jobs`), checked before any job
starts. On device cpu it sizes the training jobs (the only ones that need gigabytes there) against this machine's
memory."""

from __future__ import annotations

from grpo_budget.cluster.jobs import card, every_job, job_settings, model_shape, on_vllm, training_section
from grpo_budget.cluster.memory import Budget, check
from grpo_budget.cluster.memory_fix import smallest_fit
from grpo_budget.errors import UserError
from grpo_budget.config.settings import Training
from grpo_budget.experiment import plan, sweep
from grpo_budget.experiment.rules import RULES


def unknown(config: dict) -> list[str]:
    """Models the plan cannot size (no config.json anywhere it looks)."""
    return [m for m, spec in config["models"].items() if "bootstrap" not in spec and model_shape(config, m) is None]


def budgets(config: dict) -> list[Budget]:
    """The largest job of each GPU rule of each model the plan can size (the longest completions, every sweep
    variant), in pipeline order; on device cpu the training jobs only."""
    largest: dict[tuple[str, str], tuple[tuple, Budget]] = {}
    sized = set()
    for rule, wildcards in every_job(config):
        # all that a job's settings depend on
        key = (rule, wildcards.get("model"), wildcards.get("variant"), wildcards.get("evalset"))
        if not RULES[rule].gpu or key in sized:
            continue
        sized.add(key)
        job = job_settings(config, rule, wildcards)
        if job.budget is None:
            continue
        # the most memory; among equals (vLLM takes its share whatever the job), the longest completions
        size = (job.budget.total, job.settings.get("max_new_tokens", 0))
        if (job.model, rule) not in largest or size > largest[job.model, rule][0]:
            largest[job.model, rule] = size, job.budget
    scored = plan.scored_models(config)
    models = scored + [m for m in plan.trained_models(config) if m not in scored]
    rules = list(RULES)
    return sorted((b for _, b in largest.values()), key=lambda b: (models.index(b.model), rules.index(b.rule)))


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
    variants = sweep.names(config) or [None]
    jobs = [job_settings(config, "train", {"model": model, "variant": v}) for v in variants]
    variant = max(zip(jobs, variants), key=lambda jv: jv[0].budget.total)[1]
    t = Training.from_dict(training_section(config, model, variant))
    return smallest_fit(model, model_shape(config, model), t, card(config), config["models"][model]["dtype"],
                        on_vllm(config, t), config["device"])

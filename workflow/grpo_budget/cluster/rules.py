"""The workflow's rules as the cost plan and the rule files (``workflow/rules/*.smk``) both see them: each rule's
stage, the kind of work it does, and the name pattern of its jobs' log and benchmark files."""

from __future__ import annotations

from dataclasses import dataclass

from grpo_budget.experiment import plan

GENERATE, TRAIN, CPU = "generate", "train", "cpu"  # kinds of work: GPU generation, GPU training, CPU only
RUN = "{run}"  # stands for plan.run_name(config): per arm, and per sweep variant where the config sweeps


@dataclass(frozen=True)
class Rule:
    stage: str  # the pipeline stage (package folder) it belongs to
    kind: str  # GENERATE, TRAIN or CPU
    name: str  # its jobs' log and benchmark file name, with the rule's wildcards (and RUN)
    folder: str = ""  # its log and benchmark folder, where not the rule's own name

    @property
    def gpu(self) -> bool:
        return self.kind != CPU


# In pipeline order (the cost plan's tables follow it).
RULES = {
    "prepare": Rule("prepare", CPU, "{dataset}_{split}"),
    "bootstrap_model": Rule("prepare", CPU, "{model}"),
    "convert_gguf": Rule("prepare", CPU, "{model}"),
    "score": Rule("score", GENERATE, "{model}_{dataset}"),
    "verify": Rule("score", GENERATE, "{model}_{dataset}"),
    "select": Rule("select", CPU, plan.RUN_NAME),  # per grid run: a subset is shared by every sweep variant
    "train": Rule("train", TRAIN, RUN),
    "evaluate_base": Rule("evaluate", GENERATE, "{model}_{evalset}"),
    "evaluate": Rule("evaluate", GENERATE, RUN + "_{evalset}"),
    "drift": Rule("score", GENERATE, RUN),  # a trained arm's subset scored again (analysis.drift)
    "summary": Rule("aggregate", CPU, "summary", folder="aggregate"),
    "table": Rule("aggregate", CPU, "table_{name}", folder="aggregate"),
    "figure": Rule("aggregate", CPU, "{name}", folder="aggregate"),
}


def log_folder(rule: str) -> str:
    """The folder of a rule's logs and benchmark files (the ``{rule}`` of ``plan.PATTERNS["log"]``)."""
    return RULES[rule].folder or rule


def job_pattern(config: dict, rule: str) -> str:
    """A rule's log and benchmark file name with its wildcards, as its ``log:`` and ``benchmark:`` lines use it."""
    return RULES[rule].name.replace(RUN, plan.run_name(config))


def job_name(config: dict, rule: str, wildcards: dict) -> str:
    """The log and benchmark file name of one job of ``rule``."""
    return job_pattern(config, rule).format(**wildcards)

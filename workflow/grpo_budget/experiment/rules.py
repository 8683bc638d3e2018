"""The workflow's rules as the plan, the cost and memory plans, the records and the rule files
(``workflow/rules/*.smk``) see them, in one table: each rule's stage, the kind of work it does, the name pattern of
its jobs' log and benchmark files, the config section its settings come from, what it reads that its record must
name, and the host memory a GPU rule asks for."""

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
    section: str = ""  # the config section of a generating rule's sampling settings
    command: str = ""  # the grpo-budget subcommand its jobs run (a GPU rule's: perf/gpu_check.py reads them)
    loads_model: bool = False  # loads the base model: a local model folder's files are part of its record
    loads_adapters: bool = False  # loads the arms' LoRA adapters (vLLM sizes its LoRA slots for them)
    reads_answers: bool = False  # reads a dataset's answers file: part of its record
    host_mb: tuple[int, int] = (0, 0)  # a GPU rule's host memory (MB): base + per billion parameters (size_b)

    @property
    def gpu(self) -> bool:
        return self.kind != CPU


# The GPU rules' host memory: the weights pass through host memory on loading (2 GB per billion in bf16).
_GENERATING, _TRAINING = (16000, 4000), (32000, 6000)

# In pipeline order (the cost plan's tables and the memory plan follow it).
RULES = {
    "prepare": Rule("prepare", CPU, "{dataset}_{split}"),
    "bootstrap_model": Rule("prepare", CPU, "{model}"),
    "convert_gguf": Rule("prepare", CPU, "{model}"),
    "score": Rule("score", GENERATE, "{model}_{dataset}", section="scoring", command="score", loads_model=True,
                  host_mb=_GENERATING),
    "verify": Rule("score", GENERATE, "{model}_{dataset}", section="scoring", command="verify", loads_model=True,
                   reads_answers=True, host_mb=_GENERATING),
    "select": Rule("select", CPU, plan.RUN_NAME),  # per grid run: a subset is shared by every sweep variant
    "train": Rule("train", TRAIN, RUN, command="train", loads_model=True, reads_answers=True, host_mb=_TRAINING),
    "evaluate_base": Rule("evaluate", GENERATE, "{model}_{evalset}", section="evaluation", command="evaluate",
                          loads_model=True, host_mb=_GENERATING),
    "evaluate": Rule("evaluate", GENERATE, RUN + "_{evalset}", section="evaluation", command="evaluate",
                     loads_model=True, loads_adapters=True, host_mb=_GENERATING),
    # a trained arm's subset scored again by its final adapter, as the score job scored the pool (analysis.drift)
    "drift": Rule("score", GENERATE, RUN, section="scoring", command="drift", loads_model=True, loads_adapters=True,
                  host_mb=_GENERATING),
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

"""Every config enum that names a registry's entries, in one table: the schema file lists none of them, each is
filled from its registry, so a name added to a registry is a valid config value at once and a typo anywhere is
refused before any job, in one line listing what is available (``tests/test_registries.py`` ties them)."""

from __future__ import annotations

from grpo_budget.config import schema as config_schema
from grpo_budget.generation.backends import BACKENDS
from grpo_budget.generation.grading import ANSWER_TYPES, MODES
from grpo_budget.generation.rewards import REWARDS
from grpo_budget.prepare.benchmarks import BENCHMARKS
from grpo_budget.prepare.splits import GENERATORS
from grpo_budget.select.policies import ROUNDING, arm_names
from grpo_budget.select.sources import SOURCES
from grpo_budget.train.capping import AT_CAP, METRICS
from grpo_budget.train.methods import METHODS
from grpo_budget.train.objective import IS_MODES
from grpo_budget.train.reporting import REPORT_TARGETS

# Schema path -> the names it allows (a mapping's keys, for an object such as training.rewards), from the registry.
ENUMS = {
    ("policies", "*"): arm_names,
    ("datasets", "*", "benchmark"): lambda: list(BENCHMARKS),
    ("datasets", "*", "generator"): lambda: list(GENERATORS),
    ("datasets", "*", "answer_type"): lambda: list(ANSWER_TYPES),
    ("datasets", "*", "grading", "mode"): lambda: list(MODES),
    ("scoring", "difficulty"): lambda: list(SOURCES),
    ("budget_rounding",): lambda: list(ROUNDING),
    ("backend",): lambda: list(BACKENDS),
    ("training", "method"): lambda: list(METHODS),
    ("training", "rewards"): lambda: list(REWARDS),
    ("training", "report_to"): lambda: list(REPORT_TARGETS),
    ("training", "dynamic_at_cap"): lambda: list(AT_CAP),
    ("training", "dynamic_metric"): lambda: list(METRICS),
    ("training", "vllm_importance_sampling_mode"): lambda: list(IS_MODES),
}


def enums() -> dict[tuple[str, ...], list[str]]:
    """The table's names now, with each method's own settings that name choices (``Method.choices``)."""
    out = {pointer: names() for pointer, names in ENUMS.items()}
    for method in METHODS.values():
        out.update({("training", key): list(choices) for key, choices in method.choices.items()})
    return out


# Fields whose values are a registry's names or your own function's import path (FILE.py:NAME, MODULE:NAME): the
# schema leaves them open and the stage's own check refuses a misspelling, in one line listing the registry's names
# and the forms a function takes (``checks.semantics``: ``rewards.check``).
OPEN = {("training", "rewards")}


def schema() -> dict:
    """The config schema with the registries' names as its enums (but the :data:`OPEN` fields'). Built once per state
    of the registries (an entry added at run time is allowed), shared: do not modify it."""
    return config_schema.with_enums(tuple((p, tuple(names)) for p, names in enums().items() if p not in OPEN))


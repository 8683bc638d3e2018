"""The registry of training rewards (:data:`REWARDS`): ``training.rewards`` names some with their weights, and
TRL's GRPOTrainer sums them (``reward_funcs`` and ``GRPOConfig.reward_weights``).

Each reward reads the same grades (:func:`grpo_budget.generation.grading.grade_many`): the rewards of one batch grade
it once (a code batch runs its sandboxes once for all of them).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace

from grpo_budget.config.schema import defaults
from grpo_budget.errors import UserError
from grpo_budget.generation import custom_rewards, grading


@dataclass(frozen=True)
class Reward:
    value: Callable[[grading.Grade], float]
    doc: str


REWARDS: dict[str, Reward] = {
    "correct": Reward(lambda g: 1.0 if g.correct else 0.0, "1 for a right answer (every test passed, for code)"),
    "format": Reward(lambda g: 1.0 if g.format_ok else 0.0,
                     "1 for a well-formed final answer (one the grader can read: a box, an option, a code block)"),
    "partial": Reward(lambda g: float(g.share if g.share is not None else g.correct),
                      "the share of the item's tests passed (code), a grading function's own value; elsewhere the "
                      "same as correct"),
}


def check(weights: dict | None, where: str = "training.rewards") -> dict[str, float]:
    """``weights`` (reward name or a function's import path -> weight) as floats (None: the schema's default,
    correctness alone); an unknown name or an empty mapping is a :class:`UserError`."""
    weights = defaults(("training",))["rewards"] if weights is None else weights
    unknown = [n for n in weights if n not in REWARDS and not custom_rewards.is_ref(n)]
    if unknown or not weights:
        raise UserError(f"config field '{where}': {'unknown reward ' + repr(unknown[0]) if unknown else 'empty'}; "
                        f"allowed: {', '.join(REWARDS)} (e.g. {{correct: 1.0, format: 0.1}}), or your own function as "
                        f"{custom_rewards.FORMS}")
    return {n: float(w) for n, w in weights.items()}


def reward_functions(weights: dict | None, answer_type: str, mode: str = "lenient", pattern: str | None = None,
                     function: str | None = None, columns: tuple[str, ...] = ()
                     ) -> tuple[list[Callable[..., list[float]]], list[float]]:
    """TRL reward functions ``f(completions, answer, **kwargs)`` for the named rewards, and their weights.
    ``function``: the dataset's own grading function, which replaces the built-in grader (called with the training
    set's data ``columns``, as scoring and evaluation call it); an import path among the names is a reward of its
    own (:mod:`grpo_budget.generation.custom_rewards`)."""
    weights = check(weights)
    if function:
        grader = SimpleNamespace(grades=custom_rewards.trl_function(function, columns, as_grades=True))
    else:
        grader = grading.make_reward_function(answer_type, mode, pattern)
    last: dict = {}

    def grades(completions, answer=None, **kwargs) -> list[grading.Grade]:
        key = (id(completions), len(completions), tuple(map(str, completions)))
        if last.get("key") != key:  # the same batch for every reward of a step: grade it once
            last.update(key=key, grades=grader.grades(completions, answer, **kwargs))
        return last["grades"]

    def make(name: str) -> Callable[..., list[float]]:
        if custom_rewards.is_ref(name):
            return custom_rewards.trl_function(name, columns)
        value = REWARDS[name].value

        def reward(completions, answer=None, **kwargs) -> list[float]:
            return [value(g) for g in grades(completions, answer, **kwargs)]

        reward.__name__ = reward.__qualname__ = name  # TRL logs rewards/<name>/mean
        return reward

    return [make(n) for n in weights], list(weights.values())

"""Budget labels: the one writer, the one reader and the one regex of a budget in a path (``b{budget}`` of a run's
folder). :mod:`grpo_budget.experiment.plan` re-exports them."""

from __future__ import annotations

import re

from grpo_budget.errors import UserError

FULL_LABEL = "all"  # the budget label of the policies that set their own size
BUDGET_REGEX = FULL_LABEL + r"|[1-9]\d*|(?:\d+\.\d*|\.\d+|\d+)(?:e[+-]?\d+)?"


def format_budget(budget: float | int) -> str:
    """The path label of a budget: ``0.1`` → ``"0.1"``, ``1e-05`` → ``"1e-05"``, ``100`` → ``"100"``."""
    return repr(float(budget)) if isinstance(budget, float) else str(int(budget))


def parse_budget(label: str) -> float | int:
    """The budget a label stands for: ``"0.1"`` → 0.1 (fraction), ``"100"`` → 100 (count), ``"all"`` → 1.0."""
    if not re.fullmatch(BUDGET_REGEX, label):
        raise UserError(f"not a budget label: {label!r}; allowed: {FULL_LABEL}, a count (100) or a fraction (0.1)")
    if label == FULL_LABEL:
        return 1.0
    return float(label) if any(c in label for c in ".eE") else int(label)


def budget_sort_key(label: str) -> tuple:
    """Sort key of budget labels: fractions by size, then counts by size, then ``all`` (never as strings)."""
    if label == FULL_LABEL:
        return (2, 0.0)
    value = parse_budget(label)
    return (0 if isinstance(value, float) else 1, float(value))

"""Dynamic sampling's filter and its cap, as pure functions of a step's generation rounds.

The filter (``training.dynamic_metric``) keeps a group whose rollouts differ in:

- ``accuracy``: correctness, DAPO's filter (verl recipe ``run_dapo_qwen2.5_32b.sh``: ``filter_groups_metric=acc``);
- ``reward``: the total trained reward (what this project filtered on before; differs from accuracy once format or
  partial rewards are on).

At the cap (``training.dynamic_max_rounds`` extra rounds, still fewer mixed groups than a step needs), what the step
does (``training.dynamic_at_cap``):

- ``fill``: the batch is completed with dropped groups, in generation order (ours: every step keeps its size);
- ``error``: the run stops in one line (verl's DAPO recipe raises ``ValueError`` at ``max_num_gen_batches``);
- ``carry``: the batch is completed first with mixed groups a step before it found beyond what it needed (Guide-GRPO
  keeps such surplus in a buffer for later steps), then, if still short, with dropped groups.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

METRICS = ("accuracy", "reward")
AT_CAP = ("fill", "error", "carry")

Group = tuple[int, int]  # (round, group in that round)


def mixed(correct, advantages, num_generations: int, metric: str) -> list[bool]:
    """Per group of ``num_generations`` consecutive rows: whether it passes the filter (``metric``)."""
    if metric == "accuracy":
        c = np.asarray(correct, dtype=float).reshape(-1, num_generations)
        return [bool(x) for x in c.min(axis=1) != c.max(axis=1)]
    if metric == "reward":  # the advantage is the reward minus its group's mean: 0 everywhere iff all are equal
        a = np.asarray(advantages, dtype=float).reshape(-1, num_generations)
        return [bool(x) for x in (a != 0).any(axis=1)]
    raise ValueError(f"training.dynamic_metric is {metric!r}; allowed: {', '.join(METRICS)}")


@dataclass(frozen=True)
class Plan:
    """A step's batch: its own mixed groups (generation order), how many carried groups complete it, the dropped
    groups that fill it, the mixed groups beyond its need (``surplus``), and how many groups it lacks at the cap
    before carried or filled ones (``short``)."""

    own: list[Group]
    carried: int
    filled: list[Group]
    surplus: list[Group]
    short: int


def plan(mixed_rounds: list[list[bool]], need: int, at_cap: str, carried: int = 0) -> Plan:
    """The groups of a step that needs ``need`` groups, from the filter's verdict on each round's groups, with
    ``carried`` groups waiting from earlier steps (``carry``). With ``error`` a short plan is the caller's to refuse."""
    if at_cap not in AT_CAP:
        raise ValueError(f"training.dynamic_at_cap is {at_cap!r}; allowed: {', '.join(AT_CAP)}")
    kept = [(r, g) for r, groups in enumerate(mixed_rounds) for g, m in enumerate(groups) if m]
    dropped = [(r, g) for r, groups in enumerate(mixed_rounds) for g, m in enumerate(groups) if not m]
    own, surplus = kept[:need], kept[need:]
    short = need - len(own)
    take = min(carried, short) if at_cap == "carry" else 0
    filled = dropped[: short - take] if at_cap != "error" else []
    return Plan(own, take, filled, surplus, short)


def keep_carried(waiting: list, surplus: list, need: int) -> list:
    """The groups carried after a step: those still waiting, then its surplus, the newest ``need`` of them (older
    ones came from an older policy)."""
    return (list(waiting) + list(surplus))[-need:] if need > 0 else []

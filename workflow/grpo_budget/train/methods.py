"""Training methods (``training.method``): how an arm trains on what it bought, beside which items it bought.

- ``grpo``: TRL's GRPO as configured (the default).
- ``codapo``: CoDaPO (Zhou et al., ICML 2026, arXiv 2606.07950; code tmlr-group/CoDaPO). Each question's group gets a
  bounded value ``v = c * (1 - 4 (d - 1/2)^2) + offset`` from its rollouts' confidence ``c`` (exp of the mean
  per-token log-prob) and difficulty ``d`` (1 - the group's accuracy); the group's advantages are scaled by ``v``
  (CoDaWeighting, the code's ``compute_codapo_advantage``), and the step's highest-value questions get ``repeats``
  more groups of rollouts (CoDaSampling), trained in the same step.
- ``guided``: off-context guided rollouts (OC-GRPO; Guide-GRPO, Nath et al., arXiv 2506.13923). A group whose
  rollouts all failed is generated again from the prompt followed by a prefix of the item's reference solution; the
  objective stays the unguided prompt, so each token's importance ratio is pi_theta(o_t | q, o_<t) /
  pi_old(o_t | q, g, o_<t), clipped as TRL clips any ratio.

The pure parts live here (values, draws, where guidance goes, the guidance text); the trainer hooks are in
:mod:`grpo_budget.train.method_hooks`. Each setting's source is in the schema's description and docs/methods.md.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

import numpy as np

from grpo_budget.generation.rewards import DEFAULT as DEFAULT_REWARDS


@dataclass(frozen=True)
class Method:
    source: str
    needs_solutions: bool = False


METHODS: dict[str, Method] = {
    "grpo": Method("TRL GRPOTrainer as configured"),
    "codapo": Method("Zhou et al. 2026 (arXiv 2606.07950), tmlr-group/CoDaPO"),
    "guided": Method("OC-GRPO; Guide-GRPO (Nath et al. 2025, arXiv 2506.13923)", needs_solutions=True),
}
RESAMPLE_RULES = ("top", "value")  # the code's top-K by value; a draw proportional to value
GUIDE_WHEN = ("failed", "always")  # Guide-GRPO: only groups whose rollouts all failed; every group


PREFIXES = {"codapo": "codapo_", "guided": "guidance_"}  # a method -> the prefix of its settings


def inactive(training: dict) -> set[str]:
    """The keys of a training section that change nothing a run made before they existed did: the other methods'
    settings, the method itself when it is grpo, and the rewards when they are the default (correctness alone). Left
    out of the fingerprint and of the job's settings, so that such runs keep their checkpoints and records."""
    method = training.get("method", "grpo")
    own = PREFIXES.get(method)
    out = {k for k in training if k.startswith(tuple(PREFIXES.values())) and not (own and k.startswith(own))}
    if training.get("rewards") in (None, DEFAULT_REWARDS):
        out.add("rewards")
    return out | ({"method"} if method == "grpo" else set())


def codapo_values(correct, mean_logps, offset: float) -> np.ndarray:
    """Per group (rows: groups, columns: its rollouts): ``c * (1 - 4 (d - 0.5)^2) + offset`` with ``d`` = 1 - the
    share of correct rollouts and ``c`` = exp of the mean over the group of each rollout's mean token log-prob
    (tmlr-group/CoDaPO ``compute_codapo_advantage``). Bounded in [offset, 1 + offset]."""
    correct = np.asarray(correct, dtype=float)
    d = 1.0 - correct.mean(axis=1)
    c = np.exp(np.asarray(mean_logps, dtype=float).mean(axis=1))
    return c * (1.0 - 4.0 * (d - 0.5) ** 2) + float(offset)


def resample_count(n_groups: int, share: float) -> int:
    """Questions given extra rollouts per step: ``share`` of the step's groups, at least one (the code keeps the
    groups above the ``percentile`` = 1 - share quantile)."""
    return max(1, min(n_groups, round(share * n_groups)))


def resample_probabilities(values) -> np.ndarray:
    """The ``value`` rule's draw: each question with probability proportional to its value."""
    v = np.asarray(values, dtype=float)
    return v / v.sum()


def resample(values, k: int, rule: str, seed: int, step: int) -> list[int]:
    """The groups that get extra rollouts this step: ``k`` of them, the highest values (``top``; ties in a seeded
    order) or ``k`` independent draws proportional to value (``value``; a group drawn twice gets twice the extra
    rollouts), seeded by the run's seed and the step so a resumed step draws the same."""
    rng = np.random.default_rng([seed, step, 7])
    v = np.asarray(values, dtype=float)
    if rule == "top":
        order = np.lexsort((rng.permutation(len(v)), -v))
        return sorted(int(i) for i in order[:k])
    if rule == "value":
        return sorted(int(i) for i in rng.choice(len(v), size=k, replace=True, p=resample_probabilities(v)))
    raise ValueError(f"training.codapo_resample is {rule!r}; allowed: {', '.join(RESAMPLE_RULES)}")


def guided_groups(correct, when: str) -> list[int]:
    """The groups (rows of ``correct``: groups by rollouts) that are generated again with guidance."""
    correct = np.asarray(correct, dtype=float)
    if when == "always":
        return list(range(len(correct)))
    if when == "failed":
        return [int(i) for i in np.flatnonzero(correct.max(axis=1) <= 0)]
    raise ValueError(f"training.guidance_when is {when!r}; allowed: {', '.join(GUIDE_WHEN)}")


def guidance(solution: str, fraction: float) -> str:
    """The first ``fraction`` of a reference solution's words (rounded down), never more than all but its last two
    words, so that the final answer is left for the rollout to write."""
    words = str(solution).split()
    n = min(math.floor(fraction * len(words)), max(len(words) - 2, 0))
    return " ".join(words[:n])


def check_batch(prompts_per_step: int, num_generations: int, steps_per_generation: int, share: float,
                repeats: int) -> str | None:
    """Why CoDaPO's grown generation batch cannot be split into ``steps_per_generation`` equal micro-batches, or
    None (TRL splits a generation batch evenly and drops a remainder)."""
    extra = resample_count(prompts_per_step, share) * repeats * num_generations
    if extra % steps_per_generation:
        return (f"CoDaPO adds {extra} rollouts per step ({resample_count(prompts_per_step, share)} questions x "
                f"training.codapo_repeats {repeats} x {num_generations}), which gradient accumulation's "
                f"{steps_per_generation} micro-batches cannot split evenly: change training.codapo_repeats or "
                "training.gradient_accumulation_steps")
    return None


def draw_tag(items) -> float:
    """A number naming a set of items, logged per step so that two runs' draws can be compared exactly (exact in
    a float64: 40 bits)."""
    text = ",".join(str(int(i)) for i in sorted(items))
    return float(int(hashlib.sha256(text.encode()).hexdigest()[:10], 16))

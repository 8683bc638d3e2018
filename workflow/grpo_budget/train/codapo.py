"""CoDaPO (Zhou et al., ICML 2026, arXiv 2606.07950; code tmlr-group/CoDaPO) as a training method: each question's
group gets a bounded value ``v = c * (1 - 4 (d - 1/2)^2) + offset`` from its rollouts' confidence ``c`` (exp of the
mean per-token log-prob) and difficulty ``d`` (1 - the group's accuracy); the group's advantages are scaled by ``v``
(CoDaWeighting, the code's ``compute_codapo_advantage``), and the step's highest-value questions get ``repeats``
more groups of rollouts (CoDaSampling), trained in the same step.

The math as pure functions, then the trainer's hook (its registry entry is in :mod:`grpo_budget.train.methods`).
Each setting's source is in the schema's description and docs/methods.md."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from grpo_budget.config.settings import Training
from grpo_budget.train.batches import completion_logps, draw_tag, mean_logps, pad_id, recount, take_rows, with_old_logps

SETTINGS = ("codapo_weight_offset", "codapo_resample_share", "codapo_repeats", "codapo_resample")
RESAMPLE_RULES = ("top", "value")  # the code's top-K by value; a draw proportional to value


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


def extra_rows(t: Training) -> int:
    """The rollouts CoDaPO adds to a step's batch: its resampled questions x repeats x G (generated and trained)."""
    s = t.method_settings
    return resample_count(int(t.prompts_per_step), s["codapo_resample_share"]) * int(s["codapo_repeats"]) * int(
        t.num_generations)


def batch_problem(t: Training, micro_batches: int) -> tuple[str, str] | None:
    """The setting to change and why, where the grown batch cannot be split into ``micro_batches`` equal
    micro-batches; None where it can (TRL splits a generation batch evenly and drops a remainder)."""
    extra = extra_rows(t)
    if extra % micro_batches:
        s = t.method_settings
        questions = resample_count(int(t.prompts_per_step), s["codapo_resample_share"])
        return "codapo_repeats", (f"CoDaPO adds {extra} rollouts per step ({questions}"
                f" questions x training.codapo_repeats {s['codapo_repeats']} x {t.num_generations}), which gradient "
                f"accumulation's {micro_batches} micro-batches cannot split evenly: change training.codapo_repeats or "
                "training.gradient_accumulation_steps")
    return None


# --- the trainer's side: a hook on the step's batch (grpo_budget.train.trainer) ---------------------------------------

Generate = Callable[[list[dict]], dict]


def group_values(trainer, batch: dict) -> np.ndarray:
    """CoDaPO's value of each group of ``batch`` (its rows in groups of ``num_generations``)."""
    num_generations = trainer.num_generations
    logps = batch.get("old_per_token_logps")
    if logps is None:
        logps = completion_logps(trainer, batch)
    mean = mean_logps(logps, batch["completion_mask"]).view(-1, num_generations).float().cpu().numpy()
    return codapo_values(batch["correct"].view(-1, num_generations).cpu().numpy(), mean,
                         trainer.method_settings["codapo_weight_offset"])


def weigh_and_resample(trainer, batch: dict, generate: Generate) -> dict:
    """CoDaSampling then CoDaWeighting on a step's batch: the highest-value questions (``training.codapo_resample``)
    get ``training.codapo_repeats`` more groups of rollouts, appended to the batch; every group's advantages are
    scaled by its own value."""
    import torch

    num_generations, s = trainer.num_generations, trainer.method_settings
    values = group_values(trainer, batch)
    picks = resample(values, resample_count(len(values), s["codapo_resample_share"]), s["codapo_resample"],
                     trainer.refill_seed, trainer.state.global_step)
    items = batch["item"].view(-1, num_generations)[:, 0]
    extra = generate([trainer.train_dataset[int(items[p])] for p in picks
                      for _ in range(s["codapo_repeats"] * num_generations)])
    extra_values = group_values(trainer, extra)
    for part, v in ((batch, values), (extra, extra_values)):
        scale = torch.tensor(np.repeat(v, num_generations), dtype=part["advantages"].dtype,
                             device=part["advantages"].device)
        part["advantages"] = part["advantages"] * scale
    if "old_per_token_logps" in batch and "old_per_token_logps" not in extra:
        extra = with_old_logps(trainer, extra)
    extra = {k: v for k, v in extra.items() if k in batch}
    merged = take_rows([batch, extra], [(0, list(range(len(batch["advantages"])))),
                                        (1, list(range(len(extra["advantages"]))))], pad_id(trainer))
    counts = trainer.step_counts
    counts["codapo_items"] += [int(items[p]) for p in picks]
    counts["codapo_value"] = float(np.mean(values))
    counts["codapo_extra_rollouts"] = len(extra["advantages"])
    return recount(trainer, merged)


def counts() -> dict:
    """A step's tally, before its hook runs."""
    return {"codapo_items": []}


def metrics(c: dict) -> dict[str, float]:
    """What a CoDaPO step logs (train_log columns ``codapo/*``)."""
    return {"codapo/value_mean": c["codapo_value"], "codapo/extra_rollouts": c["codapo_extra_rollouts"],
            "codapo/draw": draw_tag(c["codapo_items"])}

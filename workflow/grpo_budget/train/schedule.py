"""A training run's length and checkpoint steps: pure arithmetic on the settings and the subset's size, shared by
training and the cost plan."""

from __future__ import annotations

import math

from grpo_budget.config.settings import Training
from grpo_budget.train.methods import method_of


def prompts_per_generation(args) -> int:
    """Distinct prompts one optimizer step draws: TRL's ``RepeatSampler`` takes the subset in chunks of
    ``generation_batch_size // num_generations`` prompts and drops a final short chunk, so a smaller subset
    yields no batch at all (and the Trainer silently runs zero steps)."""
    return args.generation_batch_size // args.num_generations


def default_prompts_per_step(t: Training) -> int:
    """``prompts_per_generation`` of :func:`grpo_budget.train.training.grpo_config` on one process, without building it:
    TRL's generation batch (the per-device batch x the accumulation steps) over G."""
    return t.per_device_batch * int(t.gradient_accumulation_steps) // int(t.num_generations)


def _half_up(x: float) -> int:
    """``x`` rounded to the nearest integer, halves up (2.5 -> 3; Python's ``round`` would give 2); rounding to 9
    decimals first keeps float noise such as 0.29 * 50 = 14.499999999999998 from deciding the side."""
    return math.floor(round(x, 9) + 0.5)


def schedule(n_items: int, t: Training, per_step_prompts: int | None = None) -> tuple[int, list[int]]:
    """``(max_steps, checkpoint steps)`` of a run on ``n_items`` subset items.

    Without ``epochs``: the configured ``max_steps``. With it: ``max(1, epochs * steps_per_epoch)`` rounded to the
    nearest step, halves up, where ``steps_per_epoch = n_items // per_step_prompts`` (TRL's ``RepeatSampler``
    drops a short final chunk) times the method's optimizer steps per batch (CoDaPO's two updates:
    ``Method.updates_per_batch``), and ``per_step_prompts`` is the distinct prompts one batch draws
    (``prompts_per_generation(args)``; by default ``default_prompts_per_step(t)``).

    Checkpoints: with ``checkpoints`` = n set, steps ``round(max_steps * i / n)`` for i = 1..n, halves up, the
    duplicates and zeros of a short run dropped; otherwise, without ``epochs``, every ``save_steps``-th step as the
    Trainer saves them, plus ``max_steps`` when it is not a multiple; with ``epochs`` but no ``checkpoints``, the
    final step only. The last checkpoint is always ``max_steps``.
    """
    if t.epochs is None:
        max_steps = int(t.max_steps)
    else:
        per_step = default_prompts_per_step(t) if per_step_prompts is None else int(per_step_prompts)
        per_epoch = (n_items // per_step) * method_of(t).updates_per_batch(t)
        max_steps = max(1, _half_up(float(t.epochs) * per_epoch))
    if t.checkpoints is not None:
        n = int(t.checkpoints)
        steps = [(2 * max_steps * i + n) // (2 * n) for i in range(1, n + 1)]  # exact half-up rounding
    elif t.epochs is None:
        steps = list(range(int(t.save_steps), max_steps + 1, int(t.save_steps)))
    else:
        steps = []
    steps = sorted({step for step in steps if step >= 1} | {max_steps})
    return max_steps, steps


def planned_saves(steps: list[int]):
    """A ``TrainerCallback`` that saves at exactly ``steps``: run after the Trainer's ``DefaultFlowCallback``, it
    overrides that callback's every-``save_steps`` decision at each step's end."""
    from transformers import TrainerCallback

    planned = frozenset(steps)

    class PlannedSaves(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            control.should_save = state.global_step in planned
            return control

    return PlannedSaves()

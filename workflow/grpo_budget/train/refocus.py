"""CoDaPO's second update of a batch (CoDaLearning, tmlr-group/CoDaPO ``codapo/ray_trainer.py``): which questions it
takes and how its batch is laid out. Pure functions of the first update's question values.

The reference duplicates each batch (``DuplicateBatchDataLoader``): on the even step it trains on the batch and keeps
every question whose value is at or above the ``percentile`` quantile of the batch's values (``torch.quantile``,
linear), in batch order; on the odd step it regenerates a batch of the same size from those questions, each
repeated ``repeat_count`` times in turn, cycling through them until the batch is full and cutting it there. When most
questions tie at the floor value (all solved or all failed: value 0.1), the quantile is that floor, every question
qualifies, and the odd batch is the first N / repeat_count questions in batch order.
"""

from __future__ import annotations

import numpy as np

RULES = ("percentile", "top", "value")  # the reference code's; the paper's top-K; a draw proportional to value


def percentile_picks(values, percentile: float) -> list[int]:
    """The questions at or above the ``percentile`` quantile of ``values``, in batch order (the reference's
    ``weight_threshold = torch.quantile(question_weights, percentile)``, ``w >= weight_threshold``)."""
    import torch

    v = torch.as_tensor(np.asarray(values, dtype=np.float32))
    threshold = torch.quantile(v, percentile).item()
    return [i for i, w in enumerate(v.tolist()) if w >= threshold]


def refocused(picks: list[int], repeats: int, prompts: int) -> list[int]:
    """The second update's ``prompts`` questions: each pick ``repeats`` times in turn, in the picks' order, cycling
    from the first pick again until the batch is full, cut there (the reference's odd-step reorganisation)."""
    if not picks:
        raise ValueError("no question picked for CoDaPO's second update")
    out: list[int] = []
    k = 0
    while len(out) < prompts:
        out += [picks[k % len(picks)]] * repeats
        k += 1
    return out[:prompts]

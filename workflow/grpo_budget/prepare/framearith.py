"""Mod-10 running-sum arithmetic in a fixed-width frame: the task a ~1M-parameter model learns in CPU minutes.

Each operand sits at a constant offset, so a tiny model need not look operands up by label:

    prompt      ``+7 +3 -5 +9 . . . . ?``   (``width`` slots, unused ones are ``.``)
    completion  ``7 0 5 4 = 4``             (running value mod 10 after each step, then the answer)

The number of operations is the difficulty knob (``n_ops``).
"""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Iterable

import numpy as np
import pandas as pd

OPERAND_TOKENS = [f"{s}{d}" for s in "+-" for d in range(10)]
DIGIT_TOKENS = [str(d) for d in range(10)]
SYMBOL_TOKENS = [".", "?", "="]
VOCAB = OPERAND_TOKENS + DIGIT_TOKENS + SYMBOL_TOKENS


def solve(ops: Iterable[int]) -> list[int]:
    """Running value mod 10 after each signed operation, starting from 0."""
    value, steps = 0, []
    for op in ops:
        value = (value + op) % 10
        steps.append(value)
    return steps


def format_prompt(ops: list[tuple[str, int]], width: int) -> str:
    cells = [f"{sign}{digit}" for sign, digit in ops] + ["."] * (width - len(ops))
    return " ".join(cells + ["?"])


def format_solution(steps: list[int]) -> str:
    return " ".join(str(s) for s in steps) + f" = {steps[-1]}"


def item_id(prompt: str) -> str:
    """Stable id: the prompt determines the item."""
    return "fa-" + hashlib.sha1(prompt.encode()).hexdigest()[:12]


def _sample_ops(rng: np.random.Generator, n_ops: int) -> list[tuple[str, int]]:
    signs = rng.integers(0, 2, size=n_ops)
    digits = rng.integers(0, 10, size=n_ops)
    return [("+-"[s], int(d)) for s, d in zip(signs, digits)]


def generate(
    n_items: int,
    seed: int,
    width: int = 8,
    min_ops: int = 1,
    max_ops: int = 8,
    exclude: Iterable[str] = (),
) -> pd.DataFrame:
    """``n_items`` distinct items (none of whose prompts is in ``exclude``), deterministic per seed.

    Lengths are drawn uniformly from ``[min_ops, max_ops]``; short chains have few distinct prompts, so
    a length whose prompts are used up is redrawn (the sample then leans slightly towards longer chains).
    """
    if not 1 <= min_ops <= max_ops <= width:
        raise ValueError(f"need 1 <= min_ops <= max_ops <= width, got {min_ops}, {max_ops}, {width}")
    rng = np.random.default_rng(seed)
    seen = set(exclude)
    rows = []
    attempts = 0
    while len(rows) < n_items:
        attempts += 1
        if attempts > 50 * n_items + 1000:
            raise ValueError(f"cannot draw {n_items} distinct items with max_ops={max_ops}")
        n_ops = int(rng.integers(min_ops, max_ops + 1))
        ops = _sample_ops(rng, n_ops)
        prompt = format_prompt(ops, width)
        if prompt in seen:
            continue
        seen.add(prompt)
        steps = solve(d if s == "+" else -d for s, d in ops)
        rows.append(
            {
                "id": item_id(prompt),
                "prompt": prompt,
                "answer": str(steps[-1]),
                "answer_type": "number",
                "solution": format_solution(steps),
                "n_ops": n_ops,
            }
        )
    return pd.DataFrame(rows)


PARAMS = ("width", "min_ops", "max_ops")  # the task's knobs (a dataset's params:)


def resolve_params(params: dict) -> dict:
    """The task's knobs: ``params`` over the defaults of :func:`generate` (the one place they are defined)."""
    sig = inspect.signature(generate)
    unknown = set(params) - set(PARAMS)
    if unknown:
        raise ValueError(f"unknown frame_arithmetic params {sorted(unknown)}; allowed: {', '.join(PARAMS)}")
    return {k: params.get(k, sig.parameters[k].default) for k in PARAMS}

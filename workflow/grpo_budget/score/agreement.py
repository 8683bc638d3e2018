"""Difficulty without gold answers: how much a model's K samples of an item agree.

Agreement is the share of an item's samples that give its majority answer (the pseudo-label of TTRL-style
self-consistency); answer entropy is the Shannon entropy (nats) of its answers. An unparseable sample agrees with
nothing: it never counts toward a majority, and in the entropy each one is an answer of its own. An item whose
samples are all unparseable has agreement 0 and no majority. A tie for the majority keeps the answer seen first and
is flagged (``majority_tied``). Agreement is used as a pseudo pass rate: its counts (``n_agree`` of ``n_samples``)
take the place of the graded ones (:func:`grpo_budget.select.sources.ranking_counts`), so every policy ranks by it
unchanged. Its known failure: a confident wrong majority ranks a hard item as easy
(:func:`grpo_budget.aggregate.calibration.confident_wrong` measures how often).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from grpo_budget.select.sources import AGREEMENT_COLUMNS


@dataclass(frozen=True)
class Majority:
    answer: str | None  # the most frequent parsed answer (the first seen among tied ones); None: nothing parsed
    count: int  # samples giving it
    tied: bool  # another answer is as frequent


def majority(answers: Sequence[str | None]) -> Majority:
    """The majority answer of an item's samples (``None`` entries are unparseable and never count)."""
    counts = Counter(a for a in answers if a is not None)
    if not counts:
        return Majority(None, 0, False)
    top = max(counts.values())
    first = next(a for a in answers if a is not None and counts[a] == top)  # Counter keeps first-seen order too
    return Majority(first, top, sum(c == top for c in counts.values()) > 1)


def agreement(answers: Sequence[str | None]) -> float:
    """Share of all samples that give the majority answer (NaN for no samples)."""
    return majority(answers).count / len(answers) if len(answers) else float("nan")


def answer_entropy(answers: Sequence[str | None]) -> float:
    """Shannon entropy (nats) of the answers, each unparseable sample a distinct answer (NaN for no samples)."""
    n = len(answers)
    if not n:
        return float("nan")
    counts = list(Counter(a for a in answers if a is not None).values()) + [1] * sum(a is None for a in answers)
    return float(-sum(c / n * math.log(c / n) for c in counts))




def agreement_columns(answers: pd.Series) -> pd.DataFrame:
    """:data:`AGREEMENT_COLUMNS` for a column of per-item answer lists."""
    rows = []
    for a in answers:
        a = [None if x is None else str(x) for x in a]
        m = majority(a)
        rows.append({"majority_answer": m.answer, "majority_tied": m.tied, "n_agree": m.count,
                     "agreement": agreement(a), "answer_entropy": answer_entropy(a)})
    return pd.DataFrame(rows, columns=AGREEMENT_COLUMNS, index=answers.index)

"""Difficulty without gold answers: how much a model's K samples of an item agree, and the registry of difficulty
sources a selection can rank by.

Agreement is the share of an item's samples that give its majority answer (the pseudo-label of TTRL-style
self-consistency); answer entropy is the Shannon entropy (nats) of its answers. An unparseable sample agrees with
nothing: it never counts toward a majority, and in the entropy each one is an answer of its own. An item whose
samples are all unparseable has agreement 0 and no majority. A tie for the majority keeps the answer seen first and
is flagged (``majority_tied``). Agreement is used as a pseudo pass rate: its counts (``n_agree`` of ``n_samples``)
take the place of the graded ones, so every policy ranks by it unchanged. Its known failure: a confident wrong
majority ranks a hard item as easy (:func:`confident_wrong` measures how often).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from . import stats
from .errors import UserError


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


AGREEMENT_COLUMNS = ["majority_answer", "majority_tied", "n_agree", "agreement", "answer_entropy"]


def agreement_columns(answers: pd.Series) -> pd.DataFrame:
    """:data:`AGREEMENT_COLUMNS` for a column of per-item answer lists."""
    rows = []
    for a in answers:
        a = [None if x is None else str(x) for x in a]
        m = majority(a)
        rows.append({"majority_answer": m.answer, "majority_tied": m.tied, "n_agree": m.count,
                     "agreement": agreement(a), "answer_entropy": answer_entropy(a)})
    return pd.DataFrame(rows, columns=AGREEMENT_COLUMNS, index=answers.index)


# ---------------------------------------------------------------------------------------------------------------
# Difficulty sources: what a policy ranks a pool by (an arm `POLICY@SOURCE`; a bare policy takes scoring.difficulty)


@dataclass(frozen=True)
class Source:
    proxy: bool  # scored by the configured proxy model (scoring.proxy) instead of the trained model
    labels: bool  # ranks by graded pass rates, so every pool item needs its gold answer
    doc: str


SOURCES: dict[str, Source] = {
    "labels": Source(False, True, "the trained model's pass rate against gold answers"),
    "agreement": Source(False, False, "the trained model's self-agreement (no gold answers)"),
    "proxy": Source(True, True, "the proxy model's pass rate against gold answers"),
    "proxy_agreement": Source(True, False, "the proxy model's self-agreement (no gold answers)"),
}
ARM_SEPARATOR = "@"


# The score table's per-item statistics of the model that scored (scoring.GRADED_COLUMNS' counts, EB_COLUMNS and
# AGREEMENT_COLUMNS; a test keeps them in step): a proxy arm's subset carries them as proxy_*, since they describe
# the proxy, not the trained model.
SCORED_BY_COLUMNS = ["n_samples", "n_correct", "pass_rate", "n_format_fail", "mean_completion_tokens", "n_truncated",
                     "pass_rate_eb", "pass_rate_eb_lo", "pass_rate_eb_hi", "eb_prior_a", "eb_prior_b",
                     *AGREEMENT_COLUMNS]


def as_proxy_columns(subset: pd.DataFrame) -> pd.DataFrame:
    """A proxy arm's subset: the scoring statistics renamed ``proxy_*``, and the trained model's pass rate unknown
    (NaN: the trained model never scored the pool)."""
    renamed = subset.rename(columns={c: f"proxy_{c}" for c in SCORED_BY_COLUMNS if c in subset.columns})
    return renamed.assign(pass_rate=float("nan"))


def split_arm(arm: str, default: str = "labels") -> tuple[str, str]:
    """``"hard@agreement"`` → ``("hard", "agreement")``; a bare policy takes ``default``."""
    policy, _, source = arm.partition(ARM_SEPARATOR)
    return policy, source or default


def ranking_counts(scores: pd.DataFrame, source: str) -> pd.DataFrame:
    """The score table as a policy of ``source`` sees it: for a label-free source, the agreement counts
    (``n_agree`` of ``n_samples``) in place of the graded ones and the empirical-Bayes columns refitted to them."""
    if SOURCES[source].labels:
        if scores["pass_rate"].isna().any():
            raise UserError(f"difficulty source {source!r} needs gold answers, and the pool has items without "
                            "them; use agreement or proxy_agreement")
        return scores
    if "n_agree" not in scores.columns:
        raise UserError("the score table has no agreement columns (scored before label-free difficulty): "
                        "re-run its score job")
    from .scoring import with_posterior  # the score table's own posterior, refitted to the agreement counts

    return with_posterior(scores.assign(n_correct=scores["n_agree"].astype(int), pass_rate=scores["agreement"]))


def labels_bought(subset: pd.DataFrame) -> dict:
    """Gold answers a run needed: ``scoring`` (the pool items its ranking graded: the subset's ``scoring_labels``,
    written by selection), ``training`` (its subset) and ``total`` (a subset cut from a pool labelled for scoring
    needs no more)."""
    scoring = int(subset["scoring_labels"].iloc[0]) if "scoring_labels" in subset.columns and len(subset) else 0
    return {"scoring": scoring, "training": len(subset), "total": max(scoring, len(subset))}


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rank correlation (average ranks for ties); NaN when either side is constant."""
    rx, ry = pd.Series(x).rank().to_numpy(), pd.Series(y).rank().to_numpy()
    if np.ptp(rx) == 0 or np.ptp(ry) == 0:
        return float("nan")
    return float(np.corrcoef(rx, ry)[0, 1])


def spearman_ci(x: np.ndarray, y: np.ndarray, n_boot: int, seed: int, level: float = 0.95
                ) -> tuple[float, float, float]:
    """Spearman's ρ and its percentile bootstrap interval over items."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    rho = spearman(x, y)
    if math.isnan(rho):
        return rho, float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    boots = [spearman(x[i], y[i]) for i in (rng.integers(0, len(x), len(x)) for _ in range(n_boot))]
    lo, hi = np.nanquantile(boots, [(1 - level) / 2, (1 + level) / 2])
    return rho, float(lo), float(hi)


TIERS = [(0.0, 0.0, "0"), (0.0, 0.25, "(0, 0.25]"), (0.25, 0.5, "(0.25, 0.5]"), (0.5, 0.75, "(0.5, 0.75]"),
         (0.75, 1.0, "(0.75, 1]")]
CONFIDENT = 0.5  # a majority of more than half the samples


def tier_of(pass_rate: float) -> str:
    """The gold pass-rate tier of an item (:data:`TIERS`; 0 on its own, then quarter-open intervals)."""
    for lo, hi, name in TIERS:
        if (pass_rate == 0 and hi == 0) or lo < pass_rate <= hi:
            return name
    return "?"


def confident_wrong(scores: pd.DataFrame) -> pd.DataFrame:
    """By gold pass-rate tier: items, the share whose majority answer is wrong though more than :data:`CONFIDENT`
    of the samples give it (the failure that makes agreement rank a hard item as easy), with a Wilson interval."""
    wrong = ~scores.apply(lambda r: not pd.isna(r["majority_answer"]) and _majority_correct(r), axis=1)
    confident = scores["agreement"] > CONFIDENT
    tier = scores["pass_rate"].map(tier_of)
    rows = []
    for _, _, name in TIERS:
        m = (tier == name).to_numpy()
        n = int(m.sum())
        share = float((wrong & confident).to_numpy()[m].mean()) if n else float("nan")
        lo, hi = stats.wilson_interval(share, n, 0.95) if n else (float("nan"), float("nan"))
        rows.append({"tier": name, "items": n, "confident_wrong": share, "lo": lo, "hi": hi})
    return pd.DataFrame(rows)


def _majority_correct(row: pd.Series) -> bool:
    """Whether an item's majority answer is one its correct samples gave."""
    return any(ok and a == row["majority_answer"] for a, ok in zip(row["answers"], row["correct"]))

"""The registry of difficulty sources a selection can rank by (an arm ``POLICY@SOURCE``; a bare policy takes
``scoring.difficulty``): gold-graded pass rates or self-agreement, of the trained model or of a proxy."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from grpo_budget.errors import UserError
from grpo_budget.select.posterior import EB_COLUMNS, with_posterior


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
# The columns of an item's agreement (grpo_budget.score.agreement writes them into the score table): what the
# agreement sources rank by.
AGREEMENT_COLUMNS = ["majority_answer", "majority_tied", "n_agree", "agreement", "answer_entropy"]


# The score table's per-item statistics of the model that scored (grpo_budget.generation.sample.GRADED_COLUMNS' counts, EB_COLUMNS and
# AGREEMENT_COLUMNS; a test keeps them in step): a proxy arm's subset carries them as proxy_*, since they describe
# the proxy, not the trained model.
SCORED_BY_COLUMNS = ["n_samples", "n_correct", "pass_rate", "n_format_fail", "mean_completion_tokens", "n_truncated",
                     *EB_COLUMNS, *AGREEMENT_COLUMNS]


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
    # the score table's own posterior, refitted to the agreement counts
    return with_posterior(scores.assign(n_correct=scores["n_agree"].astype(int), pass_rate=scores["agreement"]))


def labels_bought(subset: pd.DataFrame) -> dict:
    """Gold answers a run needed: ``scoring`` (the pool items its ranking graded: the subset's ``scoring_labels``,
    written by selection), ``training`` (its subset) and ``total`` (a subset cut from a pool labelled for scoring
    needs no more)."""
    scoring = int(subset["scoring_labels"].iloc[0]) if "scoring_labels" in subset.columns and len(subset) else 0
    return {"scoring": scoring, "training": len(subset), "total": max(scoring, len(subset))}



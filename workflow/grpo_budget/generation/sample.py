"""Sample completions for a table of items and grade them: what scoring, verification and evaluation share."""

from __future__ import annotations

import logging
import time

import numpy as np
import pandas as pd

from grpo_budget.config import schema
from grpo_budget.generation import custom_rewards, grading, prompts
from grpo_budget.generation.backends import Generator
from grpo_budget.generation.sampling import Sampling
from grpo_budget.prepare.splits import missing_answer

log = logging.getLogger(__name__)


GRADED_COLUMNS = ["id", "samples", "answers", "correct", "format_ok", "n_samples", "n_correct", "pass_rate",
                  "n_format_fail", "mean_completion_tokens", "n_truncated"]


def sample_and_grade(gen: Generator, items: pd.DataFrame, dataset: dict, sampling: Sampling,
                     adapter: str | None = None) -> pd.DataFrame:
    """One row per item: its samples, their extracted answers (None: unparseable), which were correct, pass rate,
    format failures and completion length. An item without a gold answer (an unlabeled pool) has no correctness:
    ``n_correct`` and ``pass_rate`` are NaN."""
    built = prompts.for_dataset(dataset, list(items["prompt"]), gen.tokenizer)
    start = time.perf_counter()
    outputs = gen.generate(built, sampling, adapter=adapter, keys=[str(i) for i in items["id"]])
    # The job's generation time apart from its startup: the cost plan fits its rates on it (grpo_budget.cluster.rates.GENERATION_LOG).
    log.info("generated %d completions in %.3f s", sum(len(o) for o in outputs), time.perf_counter() - start)
    g = schema.fill(("datasets", "*", "grading"), dataset.get("grading", {}))
    # The dataset's own grading function, where it has one, grades every completion in one call.
    own = (custom_rewards.grade_items(g["function"], items, built, [[c.text for c in comps] for comps in outputs])
           if g.get("function") else None)
    rows = []
    for i, (item_id, gold, kind, comps) in enumerate(zip(items["id"], items["answer"], items["answer_type"], outputs)):
        labeled = not missing_answer(gold)
        grades = own[i] if own is not None else grading.grade_many(
            [c.text for c in comps], [str(gold) if labeled else ""] * len(comps), kind, g["mode"], g["pattern"])
        correct = [gr.correct for gr in grades]
        rows.append(
            {
                "id": item_id,
                "samples": [c.text for c in comps],
                "answers": [gr.extracted if gr.format_ok else None for gr in grades],
                "correct": correct if labeled else [],
                "format_ok": [gr.format_ok for gr in grades],
                "n_samples": len(comps),
                "n_correct": int(sum(correct)) if labeled else float("nan"),
                "pass_rate": float(np.mean(correct)) if comps and labeled else float("nan"),
                "n_format_fail": int(sum(not gr.format_ok for gr in grades)),
                "mean_completion_tokens": float(np.mean([c.n_tokens for c in comps])) if comps else float("nan"),
                "n_truncated": int(sum(not c.finished for c in comps)),
            }
        )
    return pd.DataFrame(rows, columns=GRADED_COLUMNS)

"""Every reference solution of MBPP (974) and HumanEval (164) passes its own tests in the sandbox, run in parallel;
altered to be wrong, each fails. Real data from ../shared/data (skipped when absent; CI=true: fails)."""

from __future__ import annotations

import pandas as pd
import pytest

from grpo_budget.generation import codegrade
from grpo_budget.generation.grading import grade_many
from grpo_budget.prepare import coderows
from grpo_budget.prepare.files import load_local

pytestmark = pytest.mark.slow  # ~30 s on 2 cores: CI's slow session runs it


def every_item(shared_data, name):
    if name == "mbpp":
        frame = load_local(str(shared_data / "mbpp" / "mbpp.jsonl"), None, None, None)["train"]
        return coderows.mbpp_rows(frame, {"question": "text", "tests": "test_list", "setup": "test_setup_code",
                                     "solution": "code", "id": "task_id"})
    frame = load_local(str(shared_data / "humaneval" / "HumanEval.jsonl.gz"), None, None, None)["train"]
    return coderows.humaneval_rows(frame, {"question": "prompt", "tests": "test", "entry_point": "entry_point",
                                      "solution": "canonical_solution", "id": "task_id"})


@pytest.mark.parametrize("name, n", [("mbpp", 974), ("humaneval", 164)])
def test_every_reference_passes_and_every_perturbed_one_fails(shared_data, name, n):
    items: pd.DataFrame = every_item(shared_data, name)
    assert len(items) == n
    grades = grade_many(list(items["solution"]), list(items["answer"]), "code")
    failed = [(i, g.reason) for i, g in zip(items["id"], grades) if not g.correct]
    assert not failed, failed[:5]
    wrong = grade_many([codegrade.perturbed(s) for s in items["solution"]], list(items["answer"]), "code")
    accepted = [i for i, g in zip(items["id"], wrong) if g.correct]
    assert len(accepted) <= 0.01 * n, accepted[:5]

"""`grpo-budget pilot` (issue 55): before the grid, the share of pool items whose G samples from the base model have
mixed outcomes; near zero, it says the comparison will learn nothing and what to change, and exits 1."""

from __future__ import annotations

import subprocess
import sys

import pandas as pd
import yaml

from own_data import write_jsonl

from grpo_budget.score.pilot import NO_SIGNAL, summarize

ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]


def graded(k: list[int], n: int, unread: int = 0) -> pd.DataFrame:
    return pd.DataFrame({"n_correct": k, "n_samples": [n] * len(k), "n_format_fail": [unread] * len(k)})


def test_the_share_of_mixed_items_and_what_it_says():
    mixed = summarize("m", "d", graded([0, 2, 4, 1], 4), 4)
    assert (mixed.mixed, mixed.solved, mixed.unsolved, mixed.share) == (2, 1, 1, 0.5)
    assert abs(mixed.learnable - (0 + (1 - 0.5 ** 4 - 0.5 ** 4) + 0 + (1 - 0.25 ** 4 - 0.75 ** 4)) / 4) < 1e-12
    assert "signal: 2 of 4 items had mixed outcomes at G = 4" in "\n".join(mixed.lines())
    solved = "\n".join(summarize("m", "d", graded([4] * 20, 4), 4).lines())
    assert "NO SIGNAL" in solved and "the base model solves every item" in solved and "harder items" in solved
    unread = "\n".join(summarize("m", "d", graded([0] * 20, 4, unread=4), 4, "exp.yaml").lines())
    assert "could read no answer" in unread and "check-grader --configfile exp.yaml --dataset d" in unread
    assert NO_SIGNAL == 0.05 and summarize("m", "d", graded([1] + [0] * 20, 4), 4).share < NO_SIGNAL


def test_a_pool_the_model_cannot_solve_is_said_to_learn_nothing(tmp_path, tiny_model_dir):
    # names for answers: the tiny model's vocabulary (digits and operators) cannot spell one
    rows = [{"uid": f"c{i}", "prompt": f"{i} + {i} names which city?", "city": city}
            for i, city in enumerate(["Paris", "Lima", "Oslo", "Rome", "Kyiv", "Bern"] * 4)]
    write_jsonl(rows, tmp_path / "words.jsonl")
    config = {"device": "cpu", "results": str(tmp_path / "results"),
              "models": {"tiny": {"path": str(tiny_model_dir)}},
              "datasets": {"words": {"source": "files", "answer_type": "exact", "spec": {
                  "data_files": "words.jsonl", "test_fraction": 0.25,
                  "fields": {"question": "prompt", "answer": "city", "id": "uid"}}}},
              "policies": ["random"], "budgets": [0.5], "seeds": [0],
              "scoring": {"max_new_tokens": 6}, "training": {"num_generations": 4, "prompts_per_step": 2}}
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(config))
    out = subprocess.run([sys.executable, "-m", "grpo_budget.cli", "pilot", "--configfile", str(path), "--items", "8"],
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 1, out.stderr[-2000:]
    assert "pilot tiny · words: 8 pool items × 4 samples (training.num_generations) from the base model" in out.stdout
    assert "NO SIGNAL: 0 of 8 items (0.0%) had mixed outcomes at G = 4" in out.stdout
    assert "this comparison will learn nothing" in out.stdout

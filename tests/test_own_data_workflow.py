"""Issue 55 end to end: the docs page's config of your own rows (word problems with worked answers, multiple choice
with a letter, MMLU's integer index), as written there, with a model folder beside it (the tiny model) and your own
grading function on the word problems: validated from the config's own folder, dry-run and run from the project
root, kept small (one arm, one step, a few items). Shows that the function grades scoring, training and evaluation
alike, that the columns pass through, and that the summary says which comparison learned nothing."""

from __future__ import annotations

import os
import subprocess
import sys

import pandas as pd
import pytest
import yaml

from conftest import ROOT, run_snakemake
from own_data import docs_grader, experiment

pytestmark = pytest.mark.slow

# Your own grader as a user writes one, which also notes which job called it: right where the completion holds the
# gold answer's last digit (the tiny model writes digits, so some groups are mixed).
GRADER = '''
import os
import sys

JOBS = ("score", "verify", "train", "evaluate")


def last_digit(completions, answer, **kwargs):
    job = next((a for a in sys.argv if a in JOBS), "check")
    with open(os.environ["OWN_GRADER_LOG"], "a") as fh:
        fh.write(f"{job} {len(completions)}\\n")
    return [float(str(a)[-1] in text) for text, a in zip(completions, answer)]
'''
SMALL = {"policies": ["random"], "budgets": [4], "seeds": [0],
         "scoring": {"num_samples": 2, "max_new_tokens": 6, "batch_size": 64},
         "training": {"num_generations": 2, "prompts_per_step": 2, "max_steps": 1, "save_steps": 1,
                      "max_completion_length": 6, "lora": {"r": 2, "alpha": 4}},
         "evaluation": {"num_samples": 1, "max_new_tokens": 6, "batch_size": 64}, "analysis": {"n_boot": 100}}


def test_your_own_rows_and_grader_end_to_end(tmp_path, tiny_model_dir):
    folder = tmp_path / "mine"
    path = experiment(folder, tiny_model_dir, n=60)  # the page's data files, config and a my-model/ folder
    cfg = yaml.safe_load(path.read_text())
    name, code = docs_grader()
    (folder / name).write_text(code)
    (folder / "own_grader.py").write_text(GRADER)
    cfg["datasets"]["wordprobs"]["grading"] = {"function": "own_grader.py:last_digit"}
    cfg = {**cfg, **SMALL, "results": str(tmp_path / "results")}
    cfg["training"]["rewards"] = {"correct": 1.0, f"{name}:brief": 0.1}  # the page's reward, every dataset
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    log = tmp_path / "grader.log"
    env = {**os.environ, "OWN_GRADER_LOG": str(log)}

    # validated from the config's own folder (relative paths read from there), dry-run and run from the project root
    out = subprocess.run([sys.executable, "-m", "grpo_budget.cli", "validate-config", path.name], cwd=folder,
                         capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == f"{path.name}: ok", out.stderr[-2000:]
    results = tmp_path / "results"
    targets = [str(results / "summary.md"), str(results / "tables" / "difficulty.md")]
    dry = run_snakemake(sys.executable, "-n", *targets, "--configfile", str(path), env=env)
    for rule in ("prepare", "score", "select", "train", "evaluate_base", "evaluate", "summary"):
        assert f"rule {rule}:" in dry.stdout or f"localrule {rule}:" in dry.stdout, rule
    log.write_text("")
    run_snakemake(sys.executable, *targets, "--configfile", str(path), env=env)

    # every column of the rows passes through; MMLU's index and the letter became their labels
    pool = pd.read_parquet(results / "data" / "mcq" / "pool.parquet")
    assert {"qid", "question", "options", "user_answer"} <= set(pool.columns) and pool["id"].str.startswith("q").all()
    words = pd.read_parquet(results / "data" / "wordprobs" / "test.parquet")
    assert {"uid", "kind", "difficulty"} <= set(words.columns) and len(words) == 15
    assert "difficulty addition" in (results / "tables" / "difficulty.md").read_text()

    # the one function graded scoring, training and evaluation, and its verdicts are the recorded ones
    jobs = pd.Series([line.split()[0] for line in log.read_text().split("\n") if line.strip()])
    assert {"score", "train", "evaluate"} <= set(jobs), jobs.value_counts().to_dict()
    answers = dict(zip(words["id"], words["answer"]))
    scored = pd.read_parquet(results / "scores" / "mine" / "wordprobs.parquet")
    answers.update(zip(scored["id"], scored["answer"]))
    evaluated = [pd.read_parquet(results / "base" / "mine" / "wordprobs.parquet"),
                 pd.read_parquet(results / "runs" / "mine" / "wordprobs" / "random" / "b4" / "s0" / "eval" /
                                 "wordprobs.parquet")]
    for table in [scored, *evaluated]:
        for item, samples, correct in zip(table["id"], table["samples"], table["correct"]):
            assert list(correct) == [answers[item][-1] in s for s in samples]
    assert scored["correct"].map(any).any()  # some samples right: the function, not the number grader, decided
    train_log = pd.read_parquet(results / "runs" / "mine" / "wordprobs" / "random" / "b4" / "s0" / "train_log.parquet")
    assert "rewards/my_grader:brief/mean" in train_log.columns and "rewards/correct/mean" in train_log.columns

    # the comparisons whose training saw no reward variance say so first
    summary = (results / "summary.md").read_text()
    for dataset in ("mcq", "mmlu"):  # the tiny model cannot write an option's letter; brief alone varied
        assert f"**No learning signal · mine · {dataset} · budget 4:** no arm's training saw a right and a wrong" \
            in summary
    assert "Nothing to be done" in run_snakemake(sys.executable, "-n", *targets, "--configfile", str(path),
                                                 env=env).stdout

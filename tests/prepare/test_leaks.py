"""Repeats and leaks at prepare, and sizes a benchmark would ignore (issue 25, item 6): each one line,
with a known answer on small local data."""

from __future__ import annotations

import copy
import errno
import json
import logging
import shutil
from pathlib import Path

import pandas as pd
import pyarrow.lib
import pytest
import yaml

from grpo_budget import cli
from grpo_budget.errors import UserError
from grpo_budget.experiment import config, consistency, plan
from grpo_budget.config.schema import ConfigError
from grpo_budget.io import write_json, write_parquet
from grpo_budget.prepare import splits
from grpo_budget.prepare.benchmarks import BENCHMARKS
from grpo_budget.prepare.loaders import load_benchmark
from grpo_budget.prepare.rows import drop_repeats, excerpt, normalized, refuse_repeated_ids

ROOT = Path(__file__).resolve().parents[2]


def jsonl(path: Path, rows: list[dict]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def items(*rows: tuple) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["id", "prompt", "answer"])


def one_line(e: pytest.ExceptionInfo) -> str:
    assert "\n" not in str(e.value)
    return str(e.value)


# --------------------------------------------------------------------------- (a) repeats


def test_normalized_ignores_case_unicode_form_and_spacing():
    assert normalized("  What is\u00a0ＡＢ?\n\tNow  ") == "what is ab? now"
    assert normalized("Straße") == normalized("STRASSE")
    assert normalized("x  +  y") != normalized("x+y")  # spacing runs collapse; they do not vanish


def test_excerpt_is_one_short_line():
    assert excerpt("a\nb  c") == "a b c"
    cut = excerpt("word " * 40, n=20)
    assert len(cut) <= 20 and cut.endswith("...") and "\n" not in cut


def test_a_true_repeat_is_kept_once_with_a_warning(caplog):
    frame = items(("a", "What is 2+2?", "4"), ("b", "Who?", "x"), ("c", "what is  2+2? ", "4"))
    with caplog.at_level(logging.WARNING):
        kept = drop_repeats(frame, "toy pool")
    assert kept["id"].tolist() == ["a", "b"]
    (line,) = [r.getMessage() for r in caplog.records]
    assert line.startswith("toy pool: dropped 1 repeated question(s)") and "c, a repeat of a: 'what is 2+2?'" in line


def test_a_repeat_keeps_the_row_with_a_gold_answer():
    frame = items(("a", "Q", None), ("b", "q", "7"), ("c", "other", "1"))
    assert drop_repeats(frame)["id"].tolist() == ["b", "c"]


def test_a_question_repeated_with_different_answers_is_refused():
    frame = items(("a", "What is 2+2?", "4"), ("b", "WHAT IS 2+2?", "5"))
    with pytest.raises(UserError, match=r"toy: 1 question\(s\) appear more than once with different gold answers "
                                        r"\(e\.g\. 'What is 2\+2\?' with '4', '5': ids a, b\)") as e:
        drop_repeats(frame, "toy")
    one_line(e)


def test_one_id_for_two_questions_is_refused():
    with pytest.raises(UserError, match=r"toy: 1 id\(s\) are given to more than one question \(e\.g\. x for 'Q1' "
                                        r"and 'Q2'\); map a column of unique ids") as e:
        refuse_repeated_ids(items(("x", "Q1", "1"), ("x", "Q2", "2"), ("y", "Q3", "3")), "toy")
    one_line(e)


def test_a_copy_whose_id_column_repeats_is_refused_naming_the_file(tmp_path):
    path = jsonl(tmp_path / "train.jsonl", [
        {"problem": "Find $x$ if $2x=4$.", "solution": "$x=\\boxed{2}$", "unique_id": "algebra/1.json"},
        {"problem": "Find $y$ if $3y=9$.", "solution": "$y=\\boxed{3}$", "unique_id": "algebra/1.json"},
    ])
    with pytest.raises(UserError, match=rf"math pool \({path}\): 1 id\(s\) are given to more than one question "
                                        r"\(e\.g\. math-algebra-1 for") as e:
        load_benchmark("math", {"data_files": path, "cache_dir": str(tmp_path / "cache")}, seed=0)
    assert "fields: {id: COLUMN}" in one_line(e)


def test_a_copy_that_repeats_a_question_keeps_it_once(tmp_path, caplog):
    # MATH train's one repeat, as it is in ../shared/data: two ids, a doubled space, the same gold answer
    path = jsonl(tmp_path / "train.jsonl", [
        {"problem": "Real numbers $x$ and $y$ satisfy $x^2+y^2=0$.  What is $x+y$?", "solution": "So \\boxed{0}.",
         "unique_id": "train/algebra/2463.json"},
        {"problem": "Real numbers $x$ and $y$ satisfy $x^2+y^2=0$. What is $x+y$?", "solution": "Hence \\boxed{0}.",
         "unique_id": "train/algebra/24377.json"},
    ])
    with caplog.at_level(logging.WARNING):
        pool = load_benchmark("math", {"data_files": path, "cache_dir": str(tmp_path / "cache")}, seed=0)["pool"]
    assert pool["id"].tolist() == ["math-train-algebra-2463"]
    assert any("dropped 1 repeated question(s)" in r.getMessage() for r in caplog.records)


def test_bbh_repeats_across_files_are_dropped_before_the_split(tmp_path):
    def example(i: int) -> dict:
        return {"input": f"Alice, Bob and Claire swap balls, round {i}.\nOptions:\n(A) red\n(B) blue\n(C) green",
                "target": "(A)"}

    (tmp_path / "a.json").write_text(json.dumps({"examples": [example(i) for i in range(6)]}))
    (tmp_path / "b.json").write_text(json.dumps({"examples": [example(0), example(1)]}))
    out = load_benchmark("bbh_shuffled_objects", {"data_files": str(tmp_path), "objects": [3],
                                                  "cache_dir": str(tmp_path / "cache")}, seed=0)
    assert len(out["pool"]) + len(out["test"]) == 6
    assert not set(out["pool"]["id"]) & set(out["test"]["id"])


# --------------------------------------------------------------------------- (b) pool/test leaks


def test_check_leak_compares_normalized_prompts():
    pool = pd.DataFrame({"prompt": ["What is 2+2?", "Name a colour."]})
    splits.check_leak(pool, pd.DataFrame({"prompt": ["What is 3+3?"]}), "the test set")
    with pytest.raises(UserError, match=r"^1 pool prompt\(s\) are also in the test set once case, Unicode form and "
                                        r"spacing are ignored \(e\.g\. 'What is 2\+2\?'\).*take them out") as e:
        splits.check_leak(pool, pd.DataFrame({"prompt": ["what is  2+2?"]}), "the test set")
    one_line(e)


def test_a_benchmark_whose_test_repeats_a_pool_question_with_a_doubled_space_is_refused(tmp_path):
    rows = [{"question": "Tom has 3 apples. How many?", "answer": "3\n#### 3"},
            {"question": "A pen costs $2. Cost of 5?", "answer": "10\n#### 10"}]
    pd.DataFrame(rows).to_parquet(tmp_path / "train.parquet")
    pd.DataFrame([dict(rows[0], question="Tom has 3  apples. How many?")]).to_parquet(tmp_path / "test.parquet")
    ds = {"source": "benchmark", "benchmark": "gsm8k", "seed": 0,
          "spec": {"data_files": {"train": str(tmp_path / "train.parquet"), "test": str(tmp_path / "test.parquet")},
                   "cache_dir": str(tmp_path / "cache")}}
    with pytest.raises(UserError, match=r"1 pool prompt\(s\) are also in the test set") as e:
        splits.build(ds)
    one_line(e)


# --------------------------------------------------------------------------- (c) across datasets

TINY = {"source": "builtin", "generator": "frame_arithmetic", "params": {"width": 4, "min_ops": 1, "max_ops": 4},
        "pool_size": 20, "test_size": 10, "seed": 0}


def test_prepare_against_another_datasets_test_table(tmp_path, capsys):
    pool = splits.build(TINY)["pool"]
    other = tmp_path / "other" / "test.parquet"
    write_parquet(pd.DataFrame({"prompt": ["nothing like it", f" {pool['prompt'].iloc[3].upper()}  "]}), other)
    out = tmp_path / "pool.parquet"
    args = ["prepare", "--dataset", json.dumps(TINY), "--out", f"pool={out}", "--against", str(other)]
    assert cli.main(args) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and f"1 pool prompt(s) are also in the test table {other} " in err, err
    assert "ood list" in err and not out.exists()
    # the test split is not checked against other test sets; a disjoint table lets the pool through
    assert cli.main(["prepare", "--dataset", json.dumps(TINY), "--out", f"test={tmp_path / 't.parquet'}",
                     "--against", str(other)]) == 0
    write_parquet(pd.DataFrame({"prompt": ["nothing like it"]}), other)
    assert cli.main(args + ["--against", str(other)]) == 0
    assert pd.read_parquet(out)["prompt"].tolist() == pool["prompt"].tolist()


def test_leak_tests_are_the_ood_sets_of_a_pool():
    cfg = {"datasets": {"a": {"eval_only": False, "ood": ["b", "a", "b", "c"]}, "b": {"eval_only": True, "ood": []},
                        "c": {"eval_only": False, "ood": []}, "d": {"eval_only": True, "ood": ["a"]}}}
    assert [plan.leak_tests(cfg, d) for d in "abcd"] == [["b", "c"], [], [], []]
    paper = config.load(ROOT / "configs" / "hard-examples.yaml")
    assert plan.leak_tests(paper, "gsm8k") == ["aime2025"] and plan.leak_tests(paper, "aime2025") == []


# --------------------------------------------------------------------------- (d) sizes a benchmark would ignore


def default_with(name: str, entry: dict) -> dict:
    cfg = yaml.safe_load((ROOT / "config.yaml").read_text())
    cfg["datasets"][name] = entry
    return cfg


@pytest.mark.parametrize("entry, match", [
    ({"benchmark": "gsm8k", "pool_size": 500}, r"'datasets.gsm.pool_size' is read only by built-in generators; "
                                                r"benchmark gsm8k would ignore it; allowed: spec.pool_size for "
                                                r"bbh_shuffled_objects"),
    ({"benchmark": "bbh_shuffled_objects", "test_size": 50}, r"'datasets.gsm.test_size' is read only by built-in"),
    ({"benchmark": "math", "spec": {"test_fraction": 0.2}}, r"'datasets.gsm.spec.test_fraction' is read only by "
                                                            r"bbh_shuffled_objects; benchmark math takes its pool"),
    ({"benchmark": "gsm8k", "spec": {"objects": [7]}}, r"'datasets.gsm.spec.objects' is read only by bbh"),
])
def test_a_size_a_benchmark_would_ignore_is_refused(entry, match):
    cfg = default_with("gsm", {"source": "benchmark", "eval_only": True, **entry})
    with pytest.raises(ConfigError, match=match) as e:
        config.validate(copy.deepcopy(cfg))
    one_line(e)


def test_the_bbh_split_keys_are_allowed_where_they_are_read():
    cfg = default_with("bbh", {"source": "benchmark", "benchmark": "bbh_shuffled_objects", "eval_only": True,
                               "spec": {"objects": [7], "pool_size": 100, "test_size": 100, "test_fraction": 0.5}})
    assert config.validate(cfg)
    for name, b in BENCHMARKS.items():
        assert name == consistency.BBH or not set(b.spec) & set(consistency.BBH_ONLY), name

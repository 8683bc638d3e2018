"""Checks that read your files before any job (issue 55): each mistake a new user made with their own data is
refused by `validate-config` (and every snakemake command) in one line naming the file, the column and what is
allowed, rather than a traceback in a prepare job, a silently empty split or a silently wrong answer."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from own_data import docs_config, experiment, multiple_choice, write_jsonl

from grpo_budget.experiment import config as grpo_config
from grpo_budget.config.schema import ConfigError
from grpo_budget.prepare.splits import build

ROOT = Path(__file__).resolve().parents[2]
BASE = {"models": {"m": {"path": "org/model"}}, "policies": ["random"], "budgets": [0.5], "seeds": [0],
        "training": {"prompts_per_step": 2}}


def load(folder: Path, datasets: dict, **top) -> dict:
    path = folder / "c.yaml"
    path.write_text(yaml.safe_dump({**copy.deepcopy(BASE), "datasets": datasets, **top}))
    return grpo_config.load(path)


def refused(folder: Path, datasets: dict, *needles: str, **top) -> str:
    """The config is refused in one line holding every needle."""
    with pytest.raises(ConfigError) as e:
        load(folder, datasets, **top)
    message = str(e.value)
    assert "\n" not in message
    for needle in needles:
        assert needle in message, (needle, message)
    return message


def files(spec: dict, answer_type: str = "number", **more) -> dict:
    return {"source": "files", "answer_type": answer_type, "spec": spec, **more}


@pytest.fixture
def words(tmp_path) -> Path:
    """`{question, answer: "30"}` rows: the commonest shape."""
    rows = [{"question": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(1, 41)]
    write_jsonl(rows, tmp_path / "qa.jsonl")
    return tmp_path / "qa.jsonl"


# --- source: files -------------------------------------------------------------------------------------------------


def test_the_docs_config_validates_from_any_folder(tmp_path):
    path = experiment(tmp_path / "mine")
    for cwd in (ROOT, tmp_path):  # relative paths are read from the config file's folder
        out = subprocess.run([sys.executable, "-m", "grpo_budget.cli", "validate-config", str(path)], cwd=cwd,
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 0 and out.stdout.strip().endswith(": ok"), out.stderr


def test_one_file_without_a_test_split_is_refused(tmp_path, words):
    refused(tmp_path, {"d": files({"data_files": "qa.jsonl", "fields": {"question": "question", "answer": "answer"}})},
            "datasets.d", "qa.jsonl: one set of rows", "allowed: spec.test_fraction", "data_files: {pool: FILE, test:")


def test_a_field_naming_no_column_is_refused(tmp_path, words):
    refused(tmp_path, {"d": files({"data_files": "qa.jsonl", "test_fraction": 0.25,
                                   "fields": {"question": "question", "answer": "final"}})},
            "qa.jsonl: spec.fields.answer names column 'final', which is not in the data",
            "allowed: one of its columns (question, answer)")
    refused(tmp_path, {"d": files({"data_files": "qa.jsonl", "test_fraction": 0.25,
                                   "fields": {"question": "text", "answer": "answer"}})},
            "spec.fields.question 'text' is neither a column nor a template")


def test_answers_not_of_the_answer_type_are_refused(tmp_path):
    write_jsonl([{"q": f"Capital {i}?", "a": f"City {chr(65 + i)}"} for i in range(20)], tmp_path / "c.jsonl")
    refused(tmp_path, {"d": files({"data_files": "c.jsonl", "test_size": 5, "fields": {"question": "q", "answer": "a"}})},
            "c.jsonl:", "its column 'a' (spec.fields.answer) holds no number answer",
            "allowed for answer_type number: a number, or a text ending in 'The answer is <number>'")
    assert load(tmp_path, {"d": files({"data_files": "c.jsonl", "test_size": 5, "fields": {"question": "q", "answer":
                                                                                               "a"}}, "exact")})


def test_choices_that_are_not_options_are_refused(tmp_path):
    write_jsonl([{"q": "Pick one", "opts": "red or blue", "a": "A"}] * 3, tmp_path / "m.jsonl")
    refused(tmp_path, {"d": files({"data_files": "m.jsonl", "test_size": 1,
                                   "fields": {"question": "q", "answer": "a", "choices": "opts"}}, "choice")},
            "row 1, column 'opts' (spec.fields.choices): 'red or blue' is not a set of options",
            "allowed: a list of at least two texts")
    refused(tmp_path, {"d": files({"data_files": "m.jsonl", "test_size": 1, "fields": {"question": "q", "answer": "a"}},
                                  "choice")},
            "datasets.d.spec.fields.choices' is required by answer_type choice")


def test_an_answer_type_outside_the_graders_registry_is_refused(tmp_path, words):
    refused(tmp_path, {"d": files({"data_files": "qa.jsonl", "test_size": 5,
                                   "fields": {"question": "question", "answer": "answer"}}, "regex")},
            "datasets.d.answer_type", "'number', 'option', 'math', 'choice', 'code', 'exact'")


def test_a_split_name_the_data_lacks_is_refused(tmp_path, words):
    refused(tmp_path, {"d": files({"data_files": {"train": "qa.jsonl"}, "splits": {"pool": "train", "test": "test"},
                                   "fields": {"question": "question", "answer": "answer"}})},
            "spec.splits names split 'test', which the data does not have; allowed: train")


def test_a_missing_relative_file_names_the_config_folder(tmp_path, words):
    (tmp_path / "sub").mkdir()
    message = refused(tmp_path, {"d": files({"data_files": "sub/qa.jsonl", "test_size": 5,
                                             "fields": {"question": "question", "answer": "answer"}})},
                      "'sub/qa.jsonl' does not exist in", "relative paths are read from the config file's folder")
    assert str(tmp_path) in message


def test_a_relative_model_path_is_read_from_the_config_folder(tmp_path, tiny_model_dir, words):
    import shutil

    shutil.copytree(tiny_model_dir, tmp_path / "models" / "tiny")
    cfg = load(tmp_path, {"d": files({"data_files": "qa.jsonl", "test_size": 5,
                                      "fields": {"question": "question", "answer": "answer"}})},
               models={"m": {"path": "models/tiny"}})
    assert Path(cfg["models"]["m"]["path"]).resolve() == (tmp_path / "models" / "tiny").resolve()
    refused(tmp_path, {"d": files({"data_files": "qa.jsonl", "test_size": 5,
                                   "fields": {"question": "question", "answer": "answer"}})},
            "models.m.path", "'./models/other' does not exist in", models={"m": {"path": "./models/other"}})


# --- a benchmark's name borrowed for your rows ---------------------------------------------------------------------


def test_plain_answers_as_gsm8k_need_the_answer_field_and_then_load(tmp_path, words):
    refused(tmp_path, {"g": {"source": "benchmark", "benchmark": "gsm8k",
                             "spec": {"data_files": {"train": "qa.jsonl", "test": "qa.jsonl"}}}},
            "qa.jsonl:", "rows have no gold answer in field 'answer' (spec.fields.solution; expected a worked solution "
            "ending in '#### <number>')", "map the column that holds the answers (spec.fields.answer)")
    write_jsonl([{"question": "What is 100 + 1?", "answer": "101"}], tmp_path / "qa-test.jsonl")
    cfg = load(tmp_path, {"g": {"source": "benchmark", "benchmark": "gsm8k", "spec": {
        "data_files": {"pool": "qa.jsonl", "test": "qa-test.jsonl"}, "fields": {"answer": "answer"}}}})
    assert build(cfg["datasets"]["g"])["pool"]["answer"].tolist()[:3] == ["2", "4", "6"]


def test_a_mapped_field_that_names_no_column_is_refused_not_ignored(tmp_path, words):
    refused(tmp_path, {"g": {"source": "benchmark", "benchmark": "gsm8k",
                             "spec": {"data_files": {"train": "qa.jsonl", "test": "qa.jsonl"},
                                      "fields": {"solution": "worked"}}}},
            "spec.fields.solution names column 'worked', which is not in the data", "(question, answer)")


def test_one_file_for_a_benchmark_with_named_splits_is_refused(tmp_path, words):
    refused(tmp_path, {"g": {"source": "benchmark", "benchmark": "gsm8k",
                             "spec": {"data_files": "qa.jsonl", "fields": {"answer": "answer"}}}},
            "qa.jsonl: one split, and benchmark gsm8k takes its test set from split 'test'",
            "allowed: data_files: {pool: FILE, test: FILE}", "spec.test_fraction")


def test_multiple_choice_with_a_plain_list_through_arc_loads_and_through_bbh_is_refused(tmp_path):
    rows = multiple_choice(30)
    for r in rows[:10]:
        r["answer"] = "ABCD".index(r["answer"])  # MMLU's integer index
    write_jsonl(rows, tmp_path / "mcq.jsonl")
    write_jsonl(multiple_choice(40)[30:], tmp_path / "mcq-test.jsonl")
    cfg = load(tmp_path, {"arc": {"source": "benchmark", "benchmark": "arc", "spec": {
        "data_files": {"pool": "mcq.jsonl", "test": "mcq-test.jsonl"},
        "fields": {"question": "question", "choices": "options", "answer": "answer", "id": "qid"}}}})
    pool = build(cfg["datasets"]["arc"])["pool"]
    assert len(pool) == 30 and pool["answer"].notna().all()  # no row dropped, none an IndexError
    refused(tmp_path, {"bbh": {"source": "benchmark", "benchmark": "bbh_shuffled_objects",
                               "spec": {"data_files": "mcq.jsonl"}}},
            "mcq.jsonl: none of its first 5 rows is a tracking shuffled objects item",
            "for your own multiple choice source: files with answer_type: choice")


def test_a_data_mistake_is_one_line_on_the_command_line(tmp_path, words):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({**BASE, "datasets": {"d": files({"data_files": "qa.jsonl", "fields": {
        "question": "question", "answer": "answer"}})}}))
    out = subprocess.run([sys.executable, "-m", "grpo_budget.cli", "validate-config", str(path)], cwd=ROOT,
                         capture_output=True, text=True, timeout=300, env={**os.environ})
    lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
    assert out.returncode == 2 and len(lines) == 1 and "Traceback" not in out.stderr, out.stderr
    assert lines[0].startswith("grpo-budget: error: config field 'datasets.d': ") and "qa.jsonl" in lines[0]


def test_the_docs_config_keys_are_the_checked_ones():
    """What the page shows is what validation knows (a renamed key would leave the page wrong)."""
    from grpo_budget.prepare.userrows import FIELD_KEYS

    for ds in docs_config()["datasets"].values():
        assert ds["source"] == "files" and set(ds["spec"]["fields"]) <= set(FIELD_KEYS)
    assert pd.api.types.is_list_like(FIELD_KEYS)

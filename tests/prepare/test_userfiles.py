"""Your own rows (issue 55, `source: files`): the docs page's three shapes prepared as the workflow prepares them,
every answer form, choices as a list, a mapping, ARC's layout or columns, templates, ids, the difficulty column, the
pool and test roles, and every column passed through to the prepared tables, `filter:` and the stratified tiers."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from own_data import docs_config, experiment, write_jsonl

from grpo_budget.errors import UserError
from grpo_budget.experiment import config as grpo_config
from grpo_budget.generation import grading
from grpo_budget.generation.choices import parse_gold
from grpo_budget.prepare import userrows
from grpo_budget.prepare.splits import apply_filter, build


@pytest.fixture(scope="module")
def docs_setup(tmp_path_factory):
    """The docs page's data files and config, validated (relative paths read from its folder)."""
    folder = tmp_path_factory.mktemp("own")
    return grpo_config.load(experiment(folder, n=200))


def test_the_docs_three_shapes_prepare_with_their_columns(docs_setup):
    ds = docs_setup["datasets"]
    words = build(ds["wordprobs"])
    assert (len(words["pool"]), len(words["test"])) == (150, 50)  # test_fraction 0.25 of 200
    row = words["pool"].iloc[0]
    assert row["id"].startswith("wp-") and row["answer_type"] == "number"
    assert row["solution"].endswith(f"The answer is {row['answer']}.")  # the answer column kept as the solution
    assert row["difficulty"] == row["kind"] and row["uid"] == row["id"]  # kept for stratified analysis, and as-is
    assert set(words["pool"]["id"]).isdisjoint(words["test"]["id"])
    mcq = build(ds["mcq"])
    assert (len(mcq["pool"]), len(mcq["test"])) == (150, 50)  # test_size 50
    q = mcq["test"].iloc[0]
    label, options = parse_gold(q["answer"])
    assert label == q["user_answer"] and [options[k] for k in "ABCD"] == list(q["options"])  # "B" -> its label
    assert q["prompt"].startswith(q["question"]) and "\n(A) " in q["prompt"]
    mmlu = build(ds["mmlu"])
    item = mmlu["pool"].iloc[0]
    label, _ = parse_gold(item["answer"])
    assert "ABCD".index(label) == item["user_answer"]  # MMLU's integer index, 0-based
    assert len(mmlu["pool"]) + len(mmlu["test"]) == 120 and len(item["id"]) == 12  # ids: a hash of the question


def test_the_seeded_split_is_reproducible_and_moves_with_the_seed(docs_setup):
    ds = docs_setup["datasets"]["wordprobs"]
    a, b = build(ds), build(ds)
    assert a["test"]["id"].tolist() == b["test"]["id"].tolist()
    other = build({**ds, "seed": 1})
    assert other["test"]["id"].tolist() != a["test"]["id"].tolist()


def test_columns_pass_through_to_filter_and_the_stratified_tiers(docs_setup):
    from grpo_budget.aggregate.tiers import tiers

    ds = docs_setup["datasets"]["mmlu"]
    test = build({**ds, "filter": {"subject": "algebra"}})["test"]
    assert set(test["subject"]) == {"algebra"}
    base = pd.DataFrame({"id": test["id"], "accuracy": 0.0})
    tier, order, source = tiers(test, base, "subject")
    assert order == ["subject algebra"] and source == "subject"


def test_the_columns_later_stages_add_are_renamed_user_columns():
    from grpo_budget.generation.sample import GRADED_COLUMNS
    from grpo_budget.score.agreement import AGREEMENT_COLUMNS
    from grpo_budget.select.posterior import EB_COLUMNS
    from grpo_budget.select.sources import SCORED_BY_COLUMNS

    added = set(GRADED_COLUMNS + EB_COLUMNS + AGREEMENT_COLUMNS + SCORED_BY_COLUMNS) - {"id"}
    added |= {"rank", "policy", "difficulty", "difficulty_source", "scoring_labels", "step", "accuracy"}
    assert added <= set(userrows.LATER)
    frame = pd.DataFrame({"q": ["2+2?"], "a": ["4"], "rank": [3], "pass_rate": [0.5], "proxy_x": [1]})
    out = userrows.rows(frame, {"question": "q", "answer": "a"}, "number", "f.jsonl")
    assert {"user_rank", "user_pass_rate", "user_proxy_x", "q", "a"} <= set(out.columns)
    assert "rank" not in out.columns and "pass_rate" not in out.columns


@pytest.mark.parametrize("value, gold", [("The answer is 30.", "30"), ("#### 1,200", "1200"), ("so \\boxed{7}", "7"),
                                         (42, "42"), (" 5 ", "5"), (2.50, "2.5")])
def test_number_answers_in_every_form(value, gold):
    assert userrows.gold("number", value)[0] == gold


def test_choices_as_a_list_a_mapping_arcs_layout_or_columns_and_answers_as_label_index_or_text():
    opts = userrows.options(["red", "green", "blue"])
    assert opts == [("A", "red"), ("B", "green"), ("C", "blue")]
    assert userrows.options({"x": "one", "y": "two"}) == [("x", "one"), ("y", "two")]
    assert userrows.options({"label": np.array(["1", "2"]), "text": np.array(["a", "b"])}) == [("1", "a"), ("2", "b")]
    assert userrows.options('["p", "q"]') == [("A", "p"), ("B", "q")]
    assert userrows.options("just text") is None and userrows.options(["one"]) is None
    assert [userrows.choice_label(a, opts) for a in ("B", "(c)", 0, np.int64(2), "green", 3, "purple")] == \
        ["B", "C", "A", "C", "B", None, None]
    digits = [("1", "a"), ("2", "b")]
    assert userrows.choice_label(1, digits) == "1"  # a label wins over an index
    frame = pd.DataFrame({"stem": ["Pick red"], "A": ["red"], "B": ["blue"], "key": ["A"]})
    out = userrows.rows(frame, {"question": "Q: {stem}\n{choices}\nAnswer:", "choices": ["A", "B"], "answer": "key"},
                        "choice", "f.csv")
    assert out["prompt"][0] == "Q: Pick red\nOptions:\n(A) red\n(B) blue\nAnswer:"
    assert grading.grade("\\boxed{A}", out["answer"][0], "choice").correct


def test_exact_math_and_code_answers():
    assert userrows.gold("exact", " Paris ")[0] == "Paris"
    assert grading.grade("The answer is paris.", "Paris", "exact").correct
    assert not grading.grade("\\boxed{paris}", "Paris", "exact", mode="strict").correct
    assert userrows.gold("math", "so $x = \\boxed{\\frac{1}{2}}$")[0] == "\\frac{1}{2}"
    gold, _ = userrows.gold("code", ["assert add(1, 2) == 3"])
    assert json.loads(gold)["entry_point"] == "add"


def test_a_template_over_columns_and_ids_from_a_column():
    frame = pd.DataFrame({"ctx": ["Sam has 2."], "q": ["How many?"], "a": [2], "key": [17]})
    out = userrows.rows(frame, {"question": "{ctx} {q} Use \\boxed{}.", "answer": "a", "id": "key"}, "number", "f")
    assert out["prompt"][0] == "Sam has 2. How many? Use \\boxed{}." and out["id"][0] == "17"


def test_two_files_as_roles_and_named_splits(tmp_path):
    rows = [{"q": f"What is {i} + 1?", "a": i + 1} for i in range(12)]
    write_jsonl(rows[:8], tmp_path / "pool.jsonl")
    write_jsonl(rows[8:], tmp_path / "test.jsonl")
    ds = {"source": "files", "answer_type": "number", "seed": 0,
          "spec": {"data_files": {"pool": str(tmp_path / "pool.jsonl"), "test": str(tmp_path / "test.jsonl")},
                   "fields": {"question": "q", "answer": "a"}}}
    out = build(ds)
    assert (len(out["pool"]), len(out["test"])) == (8, 4)
    ds["spec"]["data_files"] = {"train": str(tmp_path / "pool.jsonl"), "validation": str(tmp_path / "test.jsonl")}
    ds["spec"]["splits"] = {"pool": "train", "test": "validation"}
    assert len(build(ds)["test"]) == 4


def test_a_prepared_table_holds_a_column_mixing_kinds(tmp_path):
    from grpo_budget.io import read_parquet, write_parquet

    write_jsonl([{"q": "1+1?", "a": 2, "meta": 5}, {"q": "2+2?", "a": 4, "meta": "n/a"}], tmp_path / "d.jsonl")
    ds = {"source": "files", "answer_type": "number", "seed": 0, "eval_only": True,
          "spec": {"data_files": str(tmp_path / "d.jsonl"), "fields": {"question": "q", "answer": "a"}}}
    test = build(ds)["test"]
    write_parquet(test, tmp_path / "t.parquet")
    assert read_parquet(tmp_path / "t.parquet")["meta"].tolist() == ["5", "n/a"]


def test_most_rows_without_an_answer_stop_prepare_in_one_line(tmp_path):
    write_jsonl([{"q": f"q{i}", "a": "unknown"} for i in range(10)], tmp_path / "d.jsonl")
    ds = {"source": "files", "answer_type": "number", "seed": 0, "eval_only": True,
          "spec": {"data_files": str(tmp_path / "d.jsonl"), "fields": {"question": "q", "answer": "a"}}}
    with pytest.raises(UserError, match=r"d.jsonl: 10 of 10 rows have no gold answer because its column 'a' "
                                        r"\(spec.fields.answer\) holds no number answer .*allowed for answer_type "
                                        r"number: a number"):
        build(ds)

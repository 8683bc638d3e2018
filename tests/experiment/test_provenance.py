"""A job's provenance record: what made its outputs, compared with what would make them now; a moved folder keeps it."""

from __future__ import annotations

import json

from grpo_budget.experiment.provenance import Verdict, compare, files_read, wanted, write
from grpo_budget.io import relative
from grpo_budget.prepare.files import local_files


def test_a_record_names_what_made_the_outputs_and_says_what_differs(tmp_path):
    data = tmp_path / "items.jsonl"
    data.write_text('{"question": "1+1"}\n')
    results = str(tmp_path / "results")
    settings = {"settings": '{"learning_rate": 0.001}', "out": f"{results}/runs/a"}
    want = wanted(results, settings, [f"{results}/data/x.parquet"], [str(data)])
    assert want["inputs"]["count"] == 1 and want["settings"]["out"] == "{results}/runs/a"
    path = tmp_path / "results/provenance/train/a.json"
    assert compare(path, want) == Verdict(False, "no record of what made its outputs")  # unknown: re-run
    write(path, json.dumps(want))
    assert compare(path, want) == Verdict(True)

    moved = str(tmp_path / "moved")  # the same job in a moved results folder: the same record
    assert wanted(moved, {**settings, "out": f"{moved}/runs/a"}, [f"{moved}/data/x.parquet"], [str(data)]) == want
    assert wanted("results", {**settings, "out": "results/runs/a"}, ["results/data/x.parquet"], [str(data)]) == want

    inputs = [f"{results}/data/x.parquet"]
    other = wanted(results, {**settings, "settings": '{"learning_rate": 0.002}'}, inputs, [str(data)])
    assert compare(path, other) == Verdict(False, "made with other settings (settings.learning_rate)")
    data.write_text('{"question": "1+2"}\n')  # same size, other content
    assert compare(path, wanted(results, settings, inputs, [str(data)])) == Verdict(False, "made with other files")
    assert compare(path, wanted(results, settings, [], [str(data)])) == Verdict(False, "made with other inputs, files")
    path.write_text('{"digest": ')  # truncated
    assert compare(path, want) == Verdict(False, "its record is unreadable")


def test_a_results_path_is_replaced_only_where_a_path_begins():
    text = '"results/x" "/w/results/y" "my-results/z" "--out results/q" "results" "{\\"f\\": \\"results/r\\"}"'
    assert relative(text, "results") == ('"{results}/x" "/w/results/y" "my-results/z" "--out {results}/q" '
                                         '"results" "{\\"f\\": \\"{results}/r\\"}"')


def test_the_files_each_rule_reads(tmp_path):
    (tmp_path / "data").mkdir()
    for name in ("a.jsonl", "b.jsonl", "notes.txt"):
        (tmp_path / "data" / name).write_text("{}\n")
    model = tmp_path / "model"
    (model / ".cache").mkdir(parents=True)
    (model / "config.json").write_text("{}")
    (model / ".cache" / "lock").write_text("")
    answers = tmp_path / "answers.csv"
    answers.write_text("id,answer\n")
    config = {"datasets": {"d": {"spec": {"data_files": {"train": str(tmp_path / "data"), "test": str(answers)}},
                                 "answers": str(answers)}},
              "models": {"m": {"path": str(model)}, "hub": {"path": "org/model"}}}
    wc = {"model": "m", "dataset": "d"}
    data = [str(tmp_path / "data" / n) for n in ("a.jsonl", "b.jsonl")]
    assert files_read(config, "prepare", {"dataset": "d"}, made_by_rules=True) == data + [str(answers)]
    assert files_read(config, "train", wc, made_by_rules=False) == [str(answers), str(model / "config.json")]
    assert files_read(config, "train", wc, made_by_rules=True) == [str(answers)]  # a bootstrapped or fetched model
    assert files_read(config, "score", wc, made_by_rules=False) == [str(model / "config.json")]
    assert files_read(config, "score", {"model": "hub", "dataset": "d"}, made_by_rules=False) == []
    assert files_read(config, "select", wc, made_by_rules=False) == []


def test_local_files_of_each_data_files_form(tmp_path):
    for name in ("x1.json", "x2.json", "y.csv"):
        (tmp_path / name).write_text("")
    assert local_files(None) == []
    assert local_files(str(tmp_path / "y.csv")) == [str(tmp_path / "y.csv")]
    assert local_files([str(tmp_path / "x*.json"), str(tmp_path / "gone.json")]) == [
        str(tmp_path / "x1.json"), str(tmp_path / "x2.json")]  # what matches nothing is the prepare job's to name
    assert local_files({"train": str(tmp_path)}) == sorted(str(tmp_path / n) for n in ("x1.json", "x2.json", "y.csv"))

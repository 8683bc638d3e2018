"""A job's provenance record: rewritten exactly when what it records changes, dated so that adding it re-runs nothing."""

from __future__ import annotations

import json

from grpo_budget.experiment.provenance import FIRST_RECORD_TIME, files_read, record
from grpo_budget.prepare.files import local_files


def test_a_record_is_written_first_as_old_then_only_when_it_changes(tmp_path):
    data = tmp_path / "items.jsonl"
    data.write_text('{"question": "1+1"}\n')
    path = tmp_path / "provenance/prepare/x/provenance.json"
    assert record(path, {"dataset": "{}"}, [str(data)])
    assert path.stat().st_mtime == FIRST_RECORD_TIME  # older than any output: nothing re-runs for it
    first = json.loads(path.read_text())
    assert not record(path, {"dataset": "{}"}, [str(data)]) and json.loads(path.read_text()) == first

    data.write_text('{"question": "1+2"}\n')  # same size, other content
    assert record(path, {"dataset": "{}"}, [str(data)])
    second = json.loads(path.read_text())
    assert second["files"] != first["files"] and path.stat().st_mtime > FIRST_RECORD_TIME
    assert record(path, {"dataset": '{"seed": 1}'}, [str(data)])  # a setting
    data.write_text('{"question": "1+1"}\n')
    assert record(path, {"dataset": "{}"}, [str(data)])  # back to the first content: a new write all the same
    third = json.loads(path.read_text())
    assert third["files"] == first["files"] and third["written_ns"] != first["written_ns"]


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

"""Bad data files end in one line naming the file (and row or field) and what to do (issue 44): gold answers that do
not parse, a few of them, bytes that are not UTF-8, a BBH .json without its "examples" key, an overlong question.
Built from the real GSM8K and BBH files (../shared/data) in tmp_path, and run through ``grpo-budget prepare``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import missing_data

from grpo_budget.errors import UserError
from grpo_budget.config.schema import defaults
from grpo_budget.prepare.loaders import load_benchmark

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
ROOT = Path(__file__).resolve().parents[2]


def real(*parts: str) -> Path:
    path = DATA.joinpath(*parts)
    if not path.exists():
        missing_data(f"real benchmark data not found: {path} (tests read ../shared/data next to the project)")
    return path


def gsm8k_rows(n: int) -> list[dict]:
    with real("gsm8k", "train.jsonl").open() as fh:
        return [json.loads(next(fh)) for _ in range(n)]


def jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def prepare(tmp_path: Path, benchmark: str, spec: dict, split: str = "pool") -> subprocess.CompletedProcess:
    """``grpo-budget prepare`` of one split, as the prepare rule runs it."""
    ds = {"source": "benchmark", "benchmark": benchmark, "seed": 0,
          "spec": {"cache_dir": str(tmp_path / "hf-cache"), **spec}}
    return subprocess.run([sys.executable, "-m", "grpo_budget.cli", "prepare", "--dataset", json.dumps(ds),
                           "--out", f"{split}={tmp_path / 'out.parquet'}"], capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, "HF_DATASETS_OFFLINE": "1"}, timeout=300)


def one_line(out: subprocess.CompletedProcess, *needles: str) -> str:
    """Exit 2 and a single ``grpo-budget: error:`` line (no traceback) holding every needle."""
    assert out.returncode == 2, out.stderr[-2000:]
    lines = [ln for ln in out.stderr.splitlines() if ln.startswith("grpo-budget: error:")]
    assert "Traceback" not in out.stderr and len(lines) == 1, out.stderr[-2000:]
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def test_gold_answers_without_hashes_say_the_rows_were_dropped_and_why(tmp_path):
    """Every answer stripped of its '#### n': the split is not merely 'empty', it says which field failed to parse."""
    rows = [dict(r, answer=r["answer"].split("####")[0]) for r in gsm8k_rows(160)]
    train = jsonl(tmp_path / "train.jsonl", rows)
    one_line(prepare(tmp_path, "gsm8k", {"data_files": {"train": str(train)}}), f"gsm8k pool ({train})",
             "all 160 rows were dropped", "no gold answer could be parsed from field 'answer'", "'#### <number>'")
    empty = jsonl(tmp_path / "empty.jsonl", [dict(r, answer="") for r in gsm8k_rows(20)])
    with pytest.raises(UserError, match="all 20 rows were dropped"):
        load_benchmark("gsm8k", {"data_files": {"train": str(empty)}, "cache_dir": str(tmp_path / "c")}, 0)


def test_unparseable_answers_above_max_ungradable_stop_prepare_with_their_count(tmp_path):
    rows = gsm8k_rows(160)
    for r in rows[:10]:
        r["answer"] = r["answer"].split("####")[0]
    train = str(jsonl(tmp_path / "train.jsonl", rows))
    one_line(prepare(tmp_path, "gsm8k", {"data_files": {"train": train}}), "10 of 160 rows (6.2%",
             "above spec.max_ungradable 0.01", "would be dropped", "field 'answer'", "raise the dataset's")
    kept = load_benchmark("gsm8k", {"data_files": {"train": train}, "max_ungradable": 0.1,
                                    "cache_dir": str(tmp_path / "c")}, 0)["pool"]
    assert len(kept) == 150  # allowed: dropped, the count in the job's log
    assert defaults(("datasets", "*", "spec"))["max_ungradable"] == 0.01


def test_a_data_file_with_bytes_that_are_not_utf8_is_named_with_line_and_offset(tmp_path):
    lines = real("gsm8k", "train.jsonl").read_bytes().splitlines(keepends=True)[:40]
    lines[5] = lines[5][:30] + b"\xe9" + lines[5][30:]  # a Latin-1 é in line 6
    path = tmp_path / "train.jsonl"
    path.write_bytes(b"".join(lines))
    offset = sum(map(len, lines[:5])) + 30
    one_line(prepare(tmp_path, "gsm8k", {"data_files": {"train": str(path)}}), f"{path}:6: byte {offset:,} (0xe9)",
             "is not UTF-8", "save the file as UTF-8")


def test_a_bbh_json_without_examples_says_the_key_is_missing(tmp_path):
    bbh = json.loads(real("bbh", "tracking_shuffled_objects_three_objects.json").read_text())
    path = tmp_path / "three.json"
    path.write_text(json.dumps({"canary": bbh["canary"], "rows": bbh["examples"]}, indent=2))
    one_line(prepare(tmp_path, "bbh_shuffled_objects", {"data_files": [str(path)], "objects": [3]}),
             f"{path}: a JSON object without the key 'examples' (its keys: canary, rows)",
             '"target": "(A)"', "set spec.field to the key that holds them")
    rows = load_benchmark("bbh_shuffled_objects", {"data_files": [str(path)], "field": "rows", "objects": [3],
                                                   "cache_dir": str(tmp_path / "c")}, 0)
    assert len(rows["pool"]) + len(rows["test"]) == 250  # the key named, the same file loads


def test_an_overlong_question_is_refused_with_its_row_and_length(tmp_path):
    rows = gsm8k_rows(40)
    rows[3]["question"] = "How many? " * 499_999 + "How many?!"  # 5 MB on one line
    path = jsonl(tmp_path / "test.jsonl", rows)
    one_line(prepare(tmp_path, "gsm8k", {"data_files": {"test": str(path)}}, split="test"),
             f"gsm8k test ({path}): row 4", "question of 5,000,000 characters", "spec.max_prompt_chars (20,000")
    assert defaults(("datasets", "*", "spec"))["max_prompt_chars"] == 20_000
    test = load_benchmark("gsm8k", {"data_files": {"test": str(path)}, "max_prompt_chars": 6_000_000,
                                    "cache_dir": str(tmp_path / "c")}, 0)["test"]
    assert test["prompt"].str.len().max() > 4_000_000  # raised, it is taken as it is

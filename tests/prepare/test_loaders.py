"""Benchmark loaders and check-grader, on the real data (../shared/data) and on
locally built copies in the hub's formats (no downloads)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import datasets
import pandas as pd
import pytest
from conftest import missing_data

from grpo_budget.errors import UserError
from grpo_budget.generation.check_grader import check, format_report, main, perturb_answer
from grpo_budget.generation.extract import normalize_option, parse_number
from grpo_budget.generation.grading import grade
from grpo_budget.prepare.benchmarks import BENCHMARKS
from grpo_budget.prepare.loaders import load_benchmark

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
BASE_COLUMNS = ["id", "prompt", "answer", "answer_type", "solution"]


def need(*parts: str) -> Path:
    path = DATA.joinpath(*parts)
    if not path.exists():
        missing_data(f"real benchmark data not found: {path} (tests read ../shared/data next to the project)")
    return path


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return str(tmp_path_factory.mktemp("hf-cache"))


@pytest.fixture(scope="module")
def gsm8k(cache):
    return load_benchmark("gsm8k", {"data_files": str(need("gsm8k", "train.jsonl")), "cache_dir": cache}, seed=0)


@pytest.fixture(scope="module")
def bbh(cache):
    return load_benchmark("bbh_shuffled_objects", {"data_files": str(need("bbh")), "cache_dir": cache}, seed=0)


@pytest.fixture(scope="module")
def math_train(cache):
    return load_benchmark("math", {"data_files": str(need("math", "train.jsonl")), "cache_dir": cache}, seed=0)


def test_constants():
    assert list(BENCHMARKS) == ["gsm8k", "bbh_shuffled_objects", "math", "aime2025", "mbpp", "humaneval", "arc"]
    assert {BENCHMARKS[b].answer_type for b in ("mbpp", "humaneval")} == {"code"} and BENCHMARKS["arc"].answer_type == "choice"
    assert BENCHMARKS["math"].instruction == "Put your final answer within \\boxed{}."
    assert "\\boxed{(X)}" in BENCHMARKS["bbh_shuffled_objects"].instruction


# --------------------------------------------------------------------------- real GSM8K


def test_gsm8k_real(gsm8k, cache):
    assert set(gsm8k) == {"pool"}  # a train file only: no test split
    pool = gsm8k["pool"]
    assert len(pool) == 7473
    assert list(pool.columns[:5]) == BASE_COLUMNS and "n_steps" in pool
    assert pool["id"].is_unique
    assert (pool["answer_type"] == "number").all()
    assert not pool["answer"].str.contains(",").any()
    assert pool["answer"].map(lambda a: parse_number(a) is not None).all()
    assert pool["n_steps"].between(1, 20).all()
    assert "####" not in pool["prompt"].iloc[0]
    first = pool.iloc[0]
    assert first["answer"] == "72" and first["n_steps"] == 2
    again = load_benchmark("gsm8k", {"data_files": str(need("gsm8k", "train.jsonl")), "cache_dir": cache}, seed=1)
    assert again["pool"]["id"].tolist() == pool["id"].tolist()  # ids are stable


def test_gsm8k_gold_solutions_grade_correct(gsm8k):
    result = check(gsm8k["pool"])
    assert result["n"] == 7473
    assert result["accuracy"] >= 0.999, format_report(result)
    perturbed = check(gsm8k["pool"], perturb=True, seed=0)
    assert perturbed["accuracy"] <= 0.01, format_report(perturbed)


# --------------------------------------------------------------------------- real BBH


def test_bbh_real_split(bbh, cache):
    pool, test = bbh["pool"], bbh["test"]
    assert len(pool) == len(test) == 375
    assert pool.groupby("n_objects").size().to_dict() == {3: 125, 5: 125, 7: 125}
    assert not set(pool["id"]) & set(test["id"])
    assert pd.concat([pool, test])["id"].is_unique
    assert (pool["n_swaps"] == pool["n_objects"]).all()
    assert pool["answer"].str.fullmatch(r"\([A-G]\)").all()
    same = load_benchmark("bbh_shuffled_objects", {"data_files": str(need("bbh")), "cache_dir": cache}, seed=0)
    assert same["test"]["id"].tolist() == test["id"].tolist()
    other = load_benchmark("bbh_shuffled_objects", {"data_files": str(need("bbh")), "cache_dir": cache}, seed=1)
    assert set(other["test"]["id"]) != set(test["id"])
    seven = load_benchmark(
        "bbh_shuffled_objects",
        {"data_files": str(need("bbh")), "cache_dir": cache, "objects": [7], "pool_size": 100, "test_size": 125},
        seed=0,
    )
    assert len(seven["pool"]) == 100 and len(seven["test"]) == 125
    assert set(seven["pool"]["n_objects"]) == {7}


def test_bbh_all_750_targets_grade_right_and_wrong_letters_wrong(bbh):
    items = pd.concat([bbh["pool"], bbh["test"]], ignore_index=True)
    assert len(items) == 750
    rng = random.Random(0)
    for row in items.itertuples():
        target = row.answer
        assert grade(row.solution, target, "option", mode="strict").correct
        for completion in (f"So the answer is \\boxed{{{target}}}.", f"So the answer is {target}."):
            assert grade(completion, target, "option").correct
            letters = [c for c in "ABCDEFG"[: row.n_objects] if c != normalize_option(target)]
            wrong = f"({rng.choice(letters)})"
            g = grade(completion, wrong, "option")
            assert g.format_ok and not g.correct
    assert check(items)["accuracy"] == 1.0
    assert check(items, perturb=True)["accuracy"] == 0.0


# --------------------------------------------------------------------------- real MATH


def test_math_real_metadata(math_train):
    pool = math_train["pool"]
    # two items have an empty \boxed{} in their solution and are dropped; one (algebra 24377) repeats algebra 2463
    assert len(pool) == 7497
    assert not pool["id"].str.contains("number_theory-711[57]$").any()
    assert pool["id"].is_unique and pool["id"].iloc[0] == "math-train-algebra-0"
    assert set(pool["level"].dropna()) == {1, 2, 3, 4, 5}
    assert pool["level"].isna().sum() == 2  # "Level ?"
    assert pool["type"].nunique() == 7
    assert pool.loc[pool["numeric"], "answer"].str.fullmatch(r"-?\d+(\.\d+)?").all()
    assert 0.5 < pool["numeric"].mean() < 0.8
    assert (pool["answer_type"] == "math").all()
    kept = load_benchmark(
        "math",
        {"data_files": str(need("math", "train.jsonl")), "drop_ungradable": False, "max_items": 50},
        seed=0,
    )
    assert len(kept["pool"]) == 50


def test_math_sample_gold_solutions_grade_correct(math_train):
    sample = math_train["pool"].sample(n=600, random_state=0)
    assert check(sample)["accuracy"] >= 0.99
    assert check(sample, perturb=True)["accuracy"] <= 0.01


@pytest.mark.slow
def test_math_all_gold_solutions_grade_correct(math_train):
    result = check(math_train["pool"])
    assert result["accuracy"] >= 0.99, format_report(result)
    perturbed = check(math_train["pool"], perturb=True, seed=0)
    assert perturbed["accuracy"] <= 0.01, format_report(perturbed)


# --------------------------------------------------------------------------- CLI


def test_check_grader_cli(capsys):
    path = str(need("gsm8k", "train.jsonl"))
    assert main(["--dataset", "gsm8k", "--data-files", path]) == 0
    assert "7473 items" in capsys.readouterr().out
    assert main(["--dataset", "gsm8k", "--data-files", path, "--perturb"]) == 0
    assert main(["--dataset", "gsm8k", "--data-files", path, "--min-accuracy", "1.01"]) == 1
    assert main(["--dataset", "gsm8k", "--data-files", path, "--perturb", "--max-accuracy", "-1"]) == 1
    assert main(["--dataset", "gsm8k", "--data-files", path, "--split", "test"]) == 2


# --------------------------------------------------------------------------- hub formats, built locally


def _jsonl(path: Path, rows: list[dict]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def test_gsm8k_hub_format_parquet_splits(tmp_path):
    rows = [
        {"question": "Tom has 3 apples and buys 1,200 more. How many?", "answer": "3+1200=<<3+1200=1203>>1203\n#### 1,203"},
        {"question": "A pen costs $2. Cost of 5?", "answer": "5*2=<<5*2=10>>10\nSo $10.\n#### 10"},
    ]
    pd.DataFrame(rows).to_parquet(tmp_path / "train.parquet")
    pd.DataFrame(rows[:1]).to_parquet(tmp_path / "test.parquet")
    out = load_benchmark(
        "gsm8k",
        {
            "data_files": {"train": str(tmp_path / "train.parquet"), "test": str(tmp_path / "test.parquet")},
            "cache_dir": str(tmp_path / "cache"),
        },
        seed=0,
    )
    assert set(out) == {"pool", "test"}
    assert out["pool"]["answer"].tolist() == ["1203", "10"]
    assert out["pool"]["n_steps"].tolist() == [1, 1]
    assert out["test"]["id"].tolist() == out["pool"]["id"].tolist()[:1]
    assert check(out["pool"])["accuracy"] == 1.0


def test_gsm8k_csv_and_field_mapping(tmp_path):
    pd.DataFrame(
        {"q": ["What is 6*7?"], "worked": ["6*7 = 42\nDone"], "final": ["42"]}
    ).to_csv(tmp_path / "data.csv", index=False)
    out = load_benchmark(
        "gsm8k",
        {
            "data_files": str(tmp_path / "data.csv"),
            "fields": {"question": "q", "solution": "worked", "answer": "final"},
            "splits": {"test": "train"},
            "cache_dir": str(tmp_path / "cache"),
        },
        seed=0,
    )
    test = out["test"]
    assert test["answer"].tolist() == ["42"] and test["n_steps"].tolist() == [2]  # no <<>>: solution lines
    assert test["prompt"].tolist() == ["What is 6*7?"]


def test_math500_style_copy(tmp_path):
    rows = [
        {"problem": "Compute $1/2+1/4$.", "solution": "It is $\\boxed{\\frac34}$.", "answer": "\\frac34",
         "subject": "Prealgebra", "level": 2, "unique_id": "test/prealgebra/1.json"},
        {"problem": "Find $x$ with $2x=4$.", "solution": "So $x=\\boxed{2}$.", "answer": "2",
         "subject": "Algebra", "level": 1, "unique_id": "test/algebra/2.json"},
    ]
    out = load_benchmark(
        "math",
        {
            "data_files": _jsonl(tmp_path / "test.jsonl", rows),
            "fields": {"type": "subject"},
            "splits": {"test": "train"},
            "cache_dir": str(tmp_path / "cache"),
        },
        seed=0,
    )
    test = out["test"]
    assert test["id"].tolist() == ["math-test-prealgebra-1", "math-test-algebra-2"]
    assert test["answer"].tolist() == ["\\frac34", "2"]
    assert test["level"].tolist() == [2, 1]
    assert test["type"].tolist() == ["Prealgebra", "Algebra"]
    assert test["numeric"].tolist() == [False, True]
    assert check(test)["accuracy"] == 1.0


def test_hendrycks_style_copy_from_the_hub_without_network(tmp_path, monkeypatch):
    """The default hub copy (EleutherAI/hendrycks_math, one config per subject)."""
    calls = []

    def fake_load_dataset(path, name=None, **kwargs):
        calls.append((path, name))
        row = {"problem": f"{name}: what is $1+1$?", "level": "Level ?" if name == "geometry" else "Level 4",
               "type": name.title(), "solution": "$1+1=\\boxed{2}$"}
        return datasets.DatasetDict(
            {"train": datasets.Dataset.from_list([row]), "test": datasets.Dataset.from_list([row])}
        )

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    out = load_benchmark("math", {}, seed=0)
    assert [c[0] for c in calls] == ["EleutherAI/hendrycks_math"] * 7
    assert len(out["pool"]) == len(out["test"]) == 7
    assert out["pool"]["level"].isna().sum() == 1
    assert out["pool"]["id"].is_unique  # no id column: ids from question hashes
    assert out["pool"]["id"].str.fullmatch(r"math-[0-9a-f]{12}").all()


def test_aime2025_hub_format(tmp_path, monkeypatch):
    part1 = [{"question": "Find the sum of all integer bases $b>9$ ...", "answer": "70"},
             {"question": "On triangle ABC ...", "answer": "588"}]
    part2 = [{"question": "Six points lie on a line ...", "answer": "068"}]
    f1 = _jsonl(tmp_path / "aime2025-I.jsonl", part1)
    f2 = _jsonl(tmp_path / "aime2025-II.jsonl", part2)
    # local files in the hub copy's format: a single file set is the test split
    out = load_benchmark("aime2025", {"data_files": [f1, f2], "cache_dir": str(tmp_path / "c")}, seed=0)
    assert set(out) == {"test"}
    test = out["test"]
    assert test["answer"].tolist() == ["70", "588", "68"]
    assert (test["answer_type"] == "number").all()
    assert test["solution"].isna().all()
    assert test["id"].is_unique
    checked = check(test)  # no worked solutions: each plain gold answer is graded boxed and stated (issue 55)
    assert (checked["n"], checked["correct"], checked["skipped"]) == (3, 3, 0)
    assert check(test, perturb=True)["correct"] == 0
    assert grade("so the answer is \\boxed{068}", test["answer"].iloc[2], "number").correct

    # the hub path: two configs, split "test"
    def fake_load_dataset(path, name=None, **kwargs):
        assert path == "opencompass/AIME2025"
        local = {"AIME2025-I": f1, "AIME2025-II": f2}[name]
        return datasets.load_dataset("json", data_files={"test": local}, cache_dir=str(tmp_path / "c"))

    real = datasets.load_dataset
    monkeypatch.setattr(datasets, "load_dataset", lambda *a, **k: fake_load_dataset(*a, **k) if a[0] != "json" else real(*a, **k))
    hub = load_benchmark("aime2025", {}, seed=0)["test"]
    assert hub["answer"].tolist() == ["70", "588", "68"]
    assert hub["part"].tolist() == ["AIME2025-I", "AIME2025-I", "AIME2025-II"]


def test_bbh_hub_format_without_network(tmp_path, monkeypatch):
    from grpo_budget.prepare.shuffled_objects import generate

    def fake_load_dataset(path, name=None, **kwargs):
        assert path == "lukaemon/bbh"
        n = {"three": 3, "five": 5, "seven": 7}[name.split("_")[3]]
        items = generate(20, n, None, seed=n)
        return datasets.DatasetDict(
            {"test": datasets.Dataset.from_pandas(items.rename(columns={"prompt": "input", "answer": "target"})[["input", "target"]])}
        )

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    out = load_benchmark("bbh_shuffled_objects", {"objects": [3, 7], "test_fraction": 0.25}, seed=0)
    assert len(out["pool"]) == 30 and len(out["test"]) == 10
    assert set(out["pool"]["n_objects"]) == {3, 7}
    assert check(pd.concat(out.values()))["accuracy"] == 1.0


def test_errors(tmp_path):
    with pytest.raises(ValueError):
        load_benchmark("mmlu", {}, 0)
    with pytest.raises(FileNotFoundError):
        load_benchmark("gsm8k", {"data_files": str(tmp_path / "missing.jsonl")}, 0)
    path = _jsonl(tmp_path / "x.jsonl", [{"text": "q", "answer": "#### 1"}])
    with pytest.raises(UserError, match="fields"):
        load_benchmark("gsm8k", {"data_files": path, "cache_dir": str(tmp_path / "c")}, 0)
    with pytest.raises(ValueError, match="splits"):
        load_benchmark(
            "gsm8k",
            {"data_files": path, "splits": {"test": "validation"}, "fields": {"question": "text"},
             "cache_dir": str(tmp_path / "c")},
            0,
        )


# --------------------------------------------------------------------------- check-grader unit


def test_perturb_answer_changes_the_value():
    rng = random.Random(0)
    for gold in ["72", "-3", "1,000", "0.5"]:
        wrong = perturb_answer(gold, "number", rng)
        assert parse_number(wrong) != parse_number(gold)
    for _ in range(20):
        assert perturb_answer("(C)", "option", rng, n_options=3) in {"(A)", "(B)"}
    for gold in ["\\frac{1}{2}", "8+4i", "\\pi", "(-\\infty, 3]"]:
        wrong = perturb_answer(gold, "math", rng)
        assert wrong != gold
        assert not grade(f"\\boxed{{{gold}}}", wrong, "math").correct


def test_check_reports_failures():
    frame = pd.DataFrame(
        {
            "id": ["a", "b", "c"],
            "answer": ["1", "2", "3"],
            "answer_type": ["number"] * 3,
            "solution": ["so \\boxed{1}", "so \\boxed{5}", "no answer"],
        }
    )
    result = check(frame, show=1)
    assert (result["n"], result["correct"], result["format_failures"], result["n_failing"]) == (3, 1, 1, 2)
    assert result["failures"] == [{"id": "b", "gold": "2", "original_gold": None, "extracted": "5", "format_ok": True}]
    assert "first 1 of 2 failing" in format_report(result)
    assert check(frame, mode="strict")["format_failures"] == 1


def test_a_malformed_jsonl_line_is_named_by_file_and_line(tmp_path):
    path = tmp_path / "train.jsonl"
    path.write_text('{"question": "q1", "answer": "#### 1"}\n{"question": "q2", "answer": "#### 2"\n')
    with pytest.raises(UserError, match=r"train\.jsonl:2: not valid JSON"):
        load_benchmark("gsm8k", {"data_files": str(path), "splits": {"pool": "train"},
                                 "cache_dir": str(tmp_path / "c")}, 0)


def test_aime_copies_with_problem_or_question_load_alike(tmp_path):
    frames = []
    for field in ("problem", "question"):
        path = _jsonl(tmp_path / f"aime-{field}.jsonl", [{field: "Find x.", "answer": "042", "id": 1}])
        frames.append(load_benchmark("aime2025", {"data_files": path, "cache_dir": str(tmp_path / "c")}, 0)["test"])
    assert frames[0].equals(frames[1]) and frames[0]["answer"].tolist() == ["42"]


def test_check_grader_maps_fields_from_the_command_line(tmp_path, capsys):
    path = _jsonl(tmp_path / "g.jsonl", [{"text": "2+2?", "answer": "It is 4.\n#### 4"}])
    argv = ["--dataset", "gsm8k", "--data-files", path, "--split", "pool"]
    with pytest.raises(UserError, match="question"):
        main(argv)
    assert main(argv + ["--field", "question=text"]) == 0
    assert "100.00%" in capsys.readouterr().out


def test_aime_part_from_a_local_column_filters_like_the_hub_config(tmp_path):
    """Paper 1 evaluates on AIME 2025-I only: `filter: {part: AIME2025-I}` selects it from a local copy too."""
    from grpo_budget.prepare.splits import apply_filter

    rows = [{"problem": f"P{i}", "answer": str(i), "id": i, "contest": "AIME2025-I" if i < 15 else "AIME2025-II"}
            for i in range(30)]
    path = _jsonl(tmp_path / "aime.jsonl", rows)
    test = load_benchmark("aime2025", {"data_files": path, "fields": {"part": "contest"},
                                       "cache_dir": str(tmp_path / "c")}, 0)["test"]
    first = apply_filter(test, {"part": "AIME2025-I"})
    assert len(test) == 30 and len(first) == 15 and set(first["answer"]) == {str(i) for i in range(15)}


def test_a_semicolon_delimited_csv_is_named_in_one_line(tmp_path):
    (tmp_path / "data.csv").write_text("q;final\nWhat is 6*7?;42\n")
    with pytest.raises(UserError, match=r"data.csv: read as comma-separated, its header 'q;final' is one column"):
        load_benchmark("gsm8k", {"data_files": str(tmp_path / "data.csv"), "fields": {"question": "q", "answer":
                       "final"}, "splits": {"test": "train"}, "cache_dir": str(tmp_path / "cache")}, seed=0)

"""Your own grading and reward functions by import path (issue 55), with TRL's signature: loaded from a file or a
module, checked before any job (imports, keywords, numbers on real rows), and called alike by scoring, training's
rewards, evaluation, check-grader and grade."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml

from own_data import docs_grader, experiment

from grpo_budget.errors import UserError
from grpo_budget.experiment import config as grpo_config
from grpo_budget.config.schema import ConfigError
from grpo_budget.generation import custom_rewards, rewards

GRADER = '''
def has_gold(completions, answer, kind=None, **kwargs):
    """1 where the completion holds the gold answer, None where it is empty."""
    return [None if not c.strip() else float(str(a) in c) for c, a in zip(completions, answer)]


def says(completions, **kwargs):
    return ["yes" for _ in completions]


def needs(completions, secret):
    return [0.0 for _ in completions]
'''


@pytest.fixture
def grader(tmp_path):
    (tmp_path / "grader.py").write_text(GRADER)
    custom_rewards.load.cache_clear()
    return tmp_path / "grader.py"


def test_a_file_function_is_loaded_and_graded_like_trl_calls_it(grader):
    ref = f"{grader}:has_gold"
    items = pd.DataFrame({"id": ["a", "b"], "prompt": ["1+1?", "2+2?"], "answer": ["2", "4"], "answer_type": "number",
                          "kind": ["x", "y"], "pass_rate": [0.1, 0.2]})
    assert custom_rewards.columns_of(items) == ["id", "answer", "answer_type", "kind"]  # not prompt nor pass_rate
    graded = custom_rewards.grade_items(ref, items, ["P1", "P2"], [["it is 2", " "], ["5"]])
    assert [[g.correct for g in gs] for gs in graded] == [[True, False], [False]]
    assert [[g.format_ok for g in gs] for gs in graded] == [[True, False], [True]]
    # training: TRL passes prompts, completions (here chat messages) and every dataset column as keywords
    funcs, weights = rewards.reward_functions({"correct": 1.0, "partial": 0.5, ref: 0.2}, "number",
                                              function=ref, columns=("id", "answer", "answer_type", "kind"))
    completions = [[{"role": "assistant", "content": "2"}], [{"role": "assistant", "content": "3"}]]
    kwargs = {"prompts": ["P1", "P2"], "answer": ["2", "4"], "answer_type": ["number"] * 2, "kind": ["x", "y"],
              "id": ["a", "b"], "item": [0, 1], "trainer_state": object()}
    assert [f(completions=completions, **kwargs) for f in funcs] == [[1.0, 0.0], [1.0, 0.0], [1.0, 0.0]]
    assert weights == [1.0, 0.5, 0.2] and funcs[2].__name__ == "grader:has_gold"


def test_refused_in_one_line_when_it_does_not_import_or_returns_no_number(grader, tmp_path):
    rows = pd.DataFrame({"id": ["a"], "prompt": ["1+1?"], "answer": ["2"], "answer_type": ["number"]})
    (tmp_path / "broken.py").write_text("import no_such_module_here\n")
    cases = {f"{tmp_path}/broken.py:f": "cannot be imported (ModuleNotFoundError: No module named "
                                        "'no_such_module_here')",
             f"{tmp_path}/missing.py:f": "does not exist",
             f"{grader}:nothing": "has no function 'nothing'",
             f"{grader}:says": "returned 'yes' (str) for a completion; allowed: a number (or None",
             f"{grader}:needs": "its parameter 'secret' is none of the keywords it is called with",
             "no_such_package.sub:f": "cannot be imported (ModuleNotFoundError",
             "not-a-path": "is not an import path"}
    for ref, needle in cases.items():
        with pytest.raises(UserError) as e:
            custom_rewards.check(ref, rows)
        assert needle in str(e.value) and "\n" not in str(e.value), (ref, str(e.value))


def test_validation_runs_the_functions_on_a_few_real_rows(tmp_path, grader):
    path = experiment(tmp_path)
    cfg = yaml.safe_load(path.read_text())
    cfg["datasets"]["wordprobs"]["grading"] = {"function": "grader.py:says"}  # beside the config
    (tmp_path / "grader.py").write_text(GRADER)
    path.write_text(yaml.safe_dump(cfg))
    with pytest.raises(ConfigError, match=r"config field 'datasets.wordprobs.grading.function': .*grader.py:says: "
                                          r"returned 'yes'"):
        grpo_config.load(path)
    cfg["datasets"]["wordprobs"]["grading"] = {"function": "grader.py:has_gold"}
    cfg["training"] = {"rewards": {"correct": 1.0, "grader.py:missing": 0.1}}
    path.write_text(yaml.safe_dump(cfg))
    with pytest.raises(ConfigError, match=r"config field 'training.rewards.*grader.py:missing' \(on dataset "
                                          r"\w+\): .*has no function 'missing'"):
        grpo_config.load(path)
    cfg["training"] = {"rewards": {"correct": 1.0, "grader.py:has_gold": 0.1}}
    path.write_text(yaml.safe_dump(cfg))
    loaded = grpo_config.load(path)
    assert custom_rewards.file_of(loaded["datasets"]["wordprobs"]["grading"]["function"]) is not None


def test_the_docs_grader_runs_as_written(tmp_path):
    name, code = docs_grader()
    (tmp_path / name).write_text(code)
    ref = f"{tmp_path / name}:within_one"
    values = custom_rewards.call(custom_rewards.load(ref), ref, ["so 30", "29", "12", "no number"], [None] * 4,
                                 {"answer": ["30", "30", "30", "30"]})
    assert values == [1.0, 0.5, 0.0, None]


def test_sampling_grades_with_the_dataset_function(tiny_model_dir, grader):
    """Scoring, verification and evaluation grade through sample_and_grade: with grading.function, its values."""
    from grpo_budget.generation.backends import make_generator
    from grpo_budget.generation.sample import sample_and_grade
    from grpo_budget.generation.sampling import Sampling

    gen = make_generator("transformers", str(tiny_model_dir), device="cpu", batch_size=8)
    items = pd.DataFrame({"id": ["a", "b"], "prompt": ["1 + 2", "3 + 4"], "answer": ["1", "+"],
                          "answer_type": "number"})
    dataset = {"prompt": {"instruction": "", "chat_template": False}, "grading": {"function": f"{grader}:has_gold"}}
    out = sample_and_grade(gen, items, dataset, Sampling(n=3, temperature=1.0, top_p=1.0, max_new_tokens=4, seed=0))
    for row, gold in zip(out.itertuples(), ["1", "+"]):
        assert row.correct == [bool(s.strip()) and gold in s for s in row.samples]  # the function's own verdicts


def test_check_grader_and_grade_take_a_config_dataset(tmp_path, capsys):
    from grpo_budget.generation import check_grader, grade_cli

    path = experiment(tmp_path, n=80)
    assert check_grader.main(["--configfile", str(path), "--dataset", "mcq"]) == 0  # plain letters, boxed and said
    assert "80 items (lenient mode): 80 graded correct = 100.00%" in capsys.readouterr().out
    assert check_grader.main(["--configfile", str(path), "--dataset", "mcq", "--perturb"]) == 0
    assert check_grader.main(["--configfile", str(path), "--dataset", "wordprobs"]) == 0  # worked solutions
    assert check_grader.main(["--configfile", str(path), "--dataset", "mmlu"]) == 0
    completions = tmp_path / "c.jsonl"
    completions.write_text("".join(json.dumps(r) + "\n" for r in [{"id": "q3", "completion": "\\boxed{X}"},
                                                                     {"id": "wp-0001", "completion": "no"}]))
    with pytest.raises(UserError, match=r"1 id\(s\) are not items of dataset mcq of"):
        grade_cli.main(["--configfile", str(path), "--dataset", "mcq", "--completions", str(completions),
                        "--out", str(tmp_path / "g.csv")])
    from grpo_budget.prepare.splits import build

    items = pd.concat(build(grpo_config.load(path)["datasets"]["mcq"]).values())
    first = items.iloc[0]
    completions.write_text(json.dumps({"id": first["id"], "completion": f"\\boxed{{{first['user_answer']}}}"}) + "\n")
    assert grade_cli.main(["--configfile", str(path), "--dataset", "mcq", "--completions", str(completions),
                           "--out", str(tmp_path / "g.csv")]) == 0
    assert pd.read_csv(tmp_path / "g.csv")["score"].tolist() == [1]


def test_check_grader_with_a_grading_function(tmp_path, grader):
    from grpo_budget.generation.check_grader import check

    frame = pd.DataFrame({"id": ["a", "b"], "prompt": ["q", "r"], "answer": ["12", "40"], "answer_type": "number",
                          "solution": [None, "so 40"]})
    assert check(frame, function=f"{grader}:has_gold")["accuracy"] == 1.0
    assert check(frame, function=f"{grader}:has_gold", perturb=True)["accuracy"] == 0.0


def test_the_docs_reward_functions_as_the_page_says(tmp_path):
    """`within_one` grades the word problems; as a training reward it would also be given the multiple choice rows,
    whose answers are not numbers: refused before any job, as the page says; `brief` reads any rows."""
    path = experiment(tmp_path, n=60)
    name, code = docs_grader()
    (tmp_path / name).write_text(code)
    cfg = yaml.safe_load(path.read_text())
    cfg["datasets"]["wordprobs"]["grading"] = {"function": f"{name}:within_one"}
    cfg["training"] = {"rewards": {"correct": 1.0, f"{name}:within_one": 0.2}}
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    with pytest.raises(ConfigError, match=r"training.rewards.*within_one' \(on dataset mcq\): .*raised ValueError"):
        grpo_config.load(path)
    cfg["training"] = {"rewards": {"correct": 1.0, f"{name}:brief": 0.1}}
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    assert grpo_config.load(path)["datasets"]["wordprobs"]["grading"]["function"].endswith("my_grader.py:within_one")

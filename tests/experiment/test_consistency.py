"""Settings that would silently run something else are refused before any job, one line each (issue 25, item 6)."""

import copy

import pandas as pd
import pytest

from grpo_budget.errors import UserError
from grpo_budget.experiment import config, consistency
from grpo_budget.config.schema import ConfigError
from grpo_budget.config.schema import defaults
from grpo_budget.prepare.benchmarks import BENCHMARKS
from grpo_budget.prepare.splits import read_answers

DEFAULT = config.load("config.yaml")


def raw(**changes) -> dict:
    import yaml

    cfg = yaml.safe_load(open("config.yaml"))
    for key, value in changes.items():
        cfg[key] = value
    return cfg


def refused(cfg: dict, match: str) -> str:
    with pytest.raises(ConfigError, match=match) as e:
        config.validate(copy.deepcopy(cfg))
    assert "\n" not in str(e.value)
    return str(e.value)


def test_a_misspelt_spec_key_is_refused_not_loaded_from_the_hub():
    cfg = raw()
    cfg["datasets"]["gsm"] = {"source": "benchmark", "benchmark": "gsm8k", "spec": {"data_file": "x.jsonl"},
                              "eval_only": True}
    refused(cfg, r"datasets.gsm.spec.data_file' is not a spec key .*allowed: hub_id")


def test_every_benchmark_default_spec_key_is_allowed():
    for b in BENCHMARKS.values():
        assert set(b.spec) <= set(consistency.SPEC_KEYS), b
    assert set(defaults(("datasets", "*", "spec"))) <= set(consistency.SPEC_KEYS)  # the schema's spec settings


@pytest.mark.parametrize("adaptive, match", [({"first": 40, "max_samples": 32}, "adaptive.first': 40"),
                                             ({"first": 4, "mean_samples": 3}, "adaptive.mean_samples': 3")])
def test_adaptive_bounds_that_would_be_clamped_are_refused(adaptive, match):
    cfg = raw()
    cfg["scoring"] = dict(cfg["scoring"], adaptive=adaptive)
    refused(cfg, match)


def test_the_same_arm_twice_is_refused():
    refused(raw(policies=["hard", "random", "hard@labels"]), "'hard' and 'hard@labels' are the same arm")


def test_overlapping_sweep_axes_are_refused():
    cfg = raw(sweep={"training.lora": [{"r": 4}, {"r": 8}], "training.lora.r": [4, 8]})
    refused(cfg, "sweep.training.lora.r': training.lora is swept too")


@pytest.mark.parametrize("field, value", [("lr_scheduler_type", "cosin"), ("loss_type", "dapoo")])
def test_trainer_strings_are_checked_before_any_job(field, value):
    cfg = raw()
    cfg["training"] = dict(cfg["training"], **{field: value})
    refused(cfg, f"training.{field}")


def test_an_answers_file_with_a_repeated_id_is_refused(tmp_path):
    path = tmp_path / "answers.csv"
    pd.DataFrame({"id": ["a", "b", "a"], "answer": ["1", "2", "3"]}).to_csv(path, index=False)
    with pytest.raises(UserError, match=r"1 id\(s\) appear more than once \(e.g. a with answers '1', '3'\)"):
        read_answers(path)

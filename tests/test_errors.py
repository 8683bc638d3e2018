"""A user's mistake is one line naming the file or field and the fix, before any job where it can be: bad configs,
missing and corrupt files, data that lacks a field, no network (the 'Nothing silently wrong' faults 4-6)."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from grpo_budget.errors import UserError
from grpo_budget.config import schema
from grpo_budget.experiment import config
from grpo_budget.prepare import splits

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = yaml.safe_load((ROOT / "config.yaml").read_text())


def cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "grpo_budget.cli", *args], capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, **(env or {})}, timeout=300)


def one_line_error(out: subprocess.CompletedProcess, *needles: str) -> str:
    """The run failed with exit 2 and a single error line (no traceback) that contains every needle."""
    assert out.returncode == 2, (out.returncode, out.stderr[-1500:])
    lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
    assert "Traceback" not in out.stderr and len(lines) == 1, out.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def refused(tmp_path: Path, cfg: dict, *needles: str) -> str:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg))
    with pytest.raises(schema.ConfigError) as e:
        config.load(path)
    for needle in needles:
        assert needle in str(e.value), (needle, str(e.value))
    return str(e.value)


# --- 4. existence and meaning checked before any job -----------------------------------------------------------


def test_a_local_model_path_that_does_not_exist(tmp_path):
    cfg = copy.deepcopy(DEFAULT)
    cfg["models"] = {"m": {"path": str(tmp_path / "no-such-model")}}
    refused(tmp_path, cfg, "models.m.path", "does not exist")
    cfg["models"] = {"m": {"path": "Qwen/Qwen3-4B"}}  # a hub id is left to the job
    assert config.validate(cfg)


def test_missing_data_files(tmp_path):
    cfg = copy.deepcopy(DEFAULT)
    cfg["datasets"]["gsm"] = {"source": "benchmark", "benchmark": "gsm8k",
                              "spec": {"data_files": str(tmp_path / "train.jsonl")}}
    refused(tmp_path, cfg, "datasets.gsm.spec.data_files", "train.jsonl", "does not exist")


def test_an_answer_pattern_that_is_not_a_regex(tmp_path):
    cfg = copy.deepcopy(DEFAULT)
    cfg["datasets"]["framearith"]["grading"]["pattern"] = r"=\s*(-?\d+"
    refused(tmp_path, cfg, "grading.pattern", "not a valid regular expression")


def test_inconsistent_generator_parameters(tmp_path):
    cfg = copy.deepcopy(DEFAULT)
    cfg["datasets"]["framearith"]["params"] = {"width": 8, "min_ops": 5, "max_ops": 3}
    refused(tmp_path, cfg, "datasets.framearith.params", "min_ops <= max_ops")


def test_a_budget_below_one_training_step(tmp_path):
    cfg = copy.deepcopy(DEFAULT)
    cfg["budgets"] = [2]
    cfg["training"]["prompts_per_step"] = 8
    refused(tmp_path, cfg, "budgets[0]", "prompts_per_step = 8")


def test_an_empty_pool_is_one_line():
    ds = config.validate(copy.deepcopy(DEFAULT))["datasets"]["framearith"]
    with pytest.raises(UserError, match="split has no items"):
        splits.build({**ds, "filter": {"n_ops": [99]}})


# --- 5. one line, not a traceback ------------------------------------------------------------------------------


def test_validate_config_on_a_yaml_syntax_error(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("models:\n  tiny: {path: x\npolicies: [hard]\n")
    one_line_error(cli("validate-config", str(bad)), "bad.yaml", "line", "not valid YAML")
    one_line_error(cli("validate-config", str(tmp_path / "missing.yaml")), "missing.yaml")


def test_validate_config_refuses_a_misspelled_registry_name_in_one_line_listing_the_names(tmp_path):
    """A typo in a reward, a method, a difficulty source or a grading mode is refused by `grpo-budget validate-config`
    (and by the workflow before any job, which validates the same way), naming the field and what is available:
    a misspelled reward used to pass and fail the train job, after scoring and selection had run."""
    typos = {"reward": ("training", {"rewards": {"corect": 1.0}}, "training.rewards", "correct, format, partial"),
             "method": ("training", {"method": "codpo"}, "training.method", "'grpo', 'codapo', 'guided'"),
             "source": ("scoring", {"difficulty": "agrement"}, "scoring.difficulty", "'labels', 'agreement'"),
             "grading mode": ("datasets", None, "datasets.framearith.grading.mode", "'strict', 'lenient', 'paper'")}
    for what, (section, change, field, names) in typos.items():
        cfg = copy.deepcopy(DEFAULT)
        if change is None:
            cfg["datasets"]["framearith"]["grading"] = {"mode": "lenent"}
        else:
            cfg[section] = {**cfg.get(section, {}), **change}
        path = tmp_path / f"{what.replace(' ', '-')}.yaml"
        path.write_text(yaml.safe_dump(cfg))
        one_line_error(cli("validate-config", str(path)), f"config field '{field}'", f"allowed: {names}")


def test_a_missing_input_file(tmp_path):
    one_line_error(cli("select", "--scores", str(tmp_path / "nope.parquet"), "--policy", "hard", "--budget", "0.1",
                       "--rounding", "half_up", "--seed", "0", "--out", str(tmp_path / "s.parquet")),
                   "nope.parquet", "does not exist")


def test_check_grader_without_network_names_the_way_out(tmp_path):
    out = cli("check-grader", "--dataset", "gsm8k",
              env={"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")})
    one_line_error(out, "openai/gsm8k", "--data-files")


def test_debug_shows_the_traceback(tmp_path):
    out = cli("--debug", "validate-config", str(tmp_path / "missing.yaml"))
    assert out.returncode != 0 and "Traceback" in out.stderr


# --- 6. a corrupt upstream output is named, with the way to recover --------------------------------------------


def test_a_truncated_subset_is_named_with_the_fix(tmp_path):
    path = tmp_path / "subset.parquet"
    pd.DataFrame({"id": ["a"], "pass_rate": [0.5]}).to_parquet(path)
    path.write_bytes(path.read_bytes()[:40])
    out = cli("select", "--scores", str(path), "--policy", "hard", "--budget", "1", "--seed", "0",
              "--rounding", "half_up", "--out", str(tmp_path / "s.parquet"))
    one_line_error(out, "subset.parquet", "not a readable Parquet file", "delete it")
    test = tmp_path / "test.parquet"
    pd.DataFrame({"id": ["a"], "prompt": ["q"], "answer": ["1"], "answer_type": ["number"]}).to_parquet(test)
    manifest = tmp_path / "manifest.json"
    manifest.write_text('{"checkpoints": [')
    out = cli("evaluate", "--model", str(tmp_path), "--test", str(test), "--manifest", str(manifest),
              "--settings", "{}", "--dataset", "{}", "--out", str(tmp_path / "e.parquet"))
    one_line_error(out, "manifest.json", "not readable JSON", "delete it")


@pytest.mark.parametrize("change, needle", [
    (lambda c: c.update(budgets=[100.0]), "budgets[0]"),
    (lambda c: c["training"].update(gradient_accumulation_steps=3), "gradient_accumulation_steps"),
    (lambda c: c["scoring"].update(verify_samples=4, verify_seed=0, seed=0), "verify_seed"),
    (lambda c: c.update(policies=["tiers"]), "datasets.framearith.tiers"),
    (lambda c: c["analysis"].update(learnable_window=2.0), "learnable_window"),
])
def test_settings_that_cannot_run_as_meant(tmp_path, change, needle):
    cfg = copy.deepcopy(DEFAULT)
    cfg.setdefault("analysis", {})
    change(cfg)
    refused(tmp_path, cfg, needle)


def test_global_flags_before_a_passthrough_command(tmp_path):
    out = cli("--threads", "1", "check-grader", "--dataset", "gsm8k",
              env={"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")})
    one_line_error(out, "openai/gsm8k")

"""A local model folder is refused before any job when it lacks what loading needs (config.json with a model_type,
weights, a tokenizer) or holds weights pickled with code; a job that meets such weights anyway says so in one line,
and torch.load stays weights_only (issue 44)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from conftest import TINY
from safetensors.torch import load_file
from test_errors import cli, one_line_error

from grpo_budget.experiment import config
from grpo_budget.config.schema import ConfigError


def with_model(tmp_path: Path, folder: Path) -> Path:
    cfg = yaml.safe_load(TINY.read_text())
    cfg["models"] = {"m": {"path": str(folder)}}
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def pickled(tmp_path: Path, tiny_model_dir: Path, extra) -> Path:
    """The tiny model with its weights as ``pytorch_model.bin`` (a torch.save pickle) holding ``extra`` beside them."""
    folder = tmp_path / "pickled"
    shutil.copytree(tiny_model_dir, folder)
    weights = load_file(folder / "model.safetensors")
    (folder / "model.safetensors").unlink()
    torch.save({**weights, **extra}, folder / "pytorch_model.bin")
    return folder


def test_an_empty_model_folder_is_refused_before_any_job(tmp_path):
    (tmp_path / "empty").mkdir()
    line = one_line_error(cli("validate-config", str(with_model(tmp_path, tmp_path / "empty"))),
                          "config field 'models.m.path'", f"{tmp_path / 'empty'} lacks config.json with a model_type",
                          "weights (model.safetensors", "a tokenizer (tokenizer.json")
    assert "model_type` key" not in line
    partial = tmp_path / "partial"
    partial.mkdir()
    (partial / "config.json").write_text('{"hidden_size": 8}')
    (partial / "model.safetensors").write_bytes(b"")
    (partial / "tokenizer.json").write_text("{}")
    with pytest.raises(ConfigError, match=r"partial lacks a model_type in its config.json;"):
        config.load(with_model(tmp_path, partial))


def test_pickled_weights_are_refused_in_one_line_naming_the_file(tmp_path, tiny_model_dir):
    folder = pickled(tmp_path, tiny_model_dir, {"stats": np.zeros(3)})  # numpy inside: not weights_only-loadable
    bin_file = folder / "pytorch_model.bin"
    one_line_error(cli("validate-config", str(with_model(tmp_path, folder))), "config field 'models.m.path'",
                   f"{bin_file}: pickled weights that torch.load(weights_only=True) refuses", "numpy",
                   "convert them to safetensors")
    # a job given the folder anyway (no config check before it): one line, not the unpickler's 83
    test = tmp_path / "test.parquet"
    pd.DataFrame({"id": ["a"], "prompt": ["1+1"], "answer": ["2"], "answer_type": ["number"]}).to_parquet(test)
    out = cli("evaluate", "--model", str(folder), "--test", str(test), "--settings", '{"device": "cpu"}',
              "--dataset", "{}", "--out", str(tmp_path / "e.parquet"))
    one_line_error(out, f"{bin_file}: pickled weights", "weights_only=True", "convert them to safetensors")


def test_plain_pickled_tensors_still_load(tmp_path, tiny_model_dir):
    """What weights_only=True accepts (tensors alone) is not refused: only code in the pickle is."""
    folder = pickled(tmp_path, tiny_model_dir, {})
    assert config.load(with_model(tmp_path, folder))["models"]["m"]["path"] == str(folder)

"""Hub models fetched once into model_store by a local rule; the jobs read the fetched folder, offline."""

import sys

import pytest
import yaml
from conftest import ROOT, run_snakemake

from grpo_budget import hub
from grpo_budget.errors import UserError


@pytest.fixture
def mirror(tmp_path, tiny_model_dir, monkeypatch):
    """A folder standing in for the hub: ORG/NAME/ copies of models (GRPO_BUDGET_HUB_MIRROR)."""
    import shutil

    shutil.copytree(tiny_model_dir, tmp_path / "hub" / "org" / "tiny")
    monkeypatch.setenv(hub.MIRROR_ENV, str(tmp_path / "hub"))
    return tmp_path / "hub"


def test_fetch_into_resumes_in_a_partial_folder_then_moves_it(tmp_path, mirror):
    partial, out = tmp_path / "store" / ".partial" / "org--tiny", tmp_path / "store" / "org--tiny"
    partial.mkdir(parents=True)
    (partial / "config.json").write_text("{}")  # an interrupted download: kept and completed
    hub.fetch_into("org/tiny", partial, out)
    assert (out / hub.COMPLETE).read_text() == "org/tiny\n" and (out / "model.safetensors").is_file()
    assert not partial.exists()
    with pytest.raises(UserError, match="no nobody/else/config.json"):
        hub.fetch("nobody/else", tmp_path / "x")


def test_the_workflow_fetches_each_hub_model_once_and_jobs_read_the_copy(tmp_path, mirror):
    cfg = yaml.safe_load((ROOT / "config.yaml").read_text())
    cfg["results"] = str(tmp_path / "results")
    cfg["model_store"] = str(tmp_path / "store")
    cfg["models"] = {"tiny": {"path": "org/tiny"}, "proxy": {"path": "org/tiny", "train": False}}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    target = str(tmp_path / "store" / "org--tiny")
    run_snakemake(sys.executable, target, "--configfile", str(tmp_path / "c.yaml"))
    assert (tmp_path / "store" / "org--tiny" / hub.COMPLETE).is_file()
    out = run_snakemake(sys.executable, "-n", "-p", "--configfile", str(tmp_path / "c.yaml"))
    assert "fetch_model" not in out.stdout  # fetched once: nothing to redo
    scores = [line for line in out.stdout.splitlines() if "grpo-budget" in line and " score " in line]
    assert scores and all(f"--model {target} " in line for line in scores)


def unreachable_hub(tmp_path) -> dict:
    """An environment whose hub cannot be reached: a closed port as the endpoint, an empty cache, no mirror."""
    import os

    env = {k: v for k, v in os.environ.items() if k not in (hub.MIRROR_ENV, "HF_HUB_OFFLINE")}
    return {**env, "HF_ENDPOINT": "http://127.0.0.1:9", "HF_HOME": str(tmp_path / "hf"), "HF_HUB_ETAG_TIMEOUT": "2",
            "HF_HUB_DOWNLOAD_TIMEOUT": "2"}


def test_an_unreachable_hub_names_the_model_and_the_fixes(tmp_path):
    """Issue 55: fetch-models without network printed the hub library's raw ConnectError, naming no model."""
    import subprocess

    cfg = yaml.safe_load((ROOT / "config.yaml").read_text())
    cfg["model_store"] = str(tmp_path / "store")
    cfg["models"] = {"qwen": {"path": "Qwen/Qwen2.5-0.5B-Instruct"}}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    env = unreachable_hub(tmp_path)
    out = subprocess.run([sys.executable, "-m", "grpo_budget.cli", "fetch-models", "--configfile",
                          str(tmp_path / "c.yaml")], capture_output=True, text=True, env=env, timeout=300)
    lines = [ln for ln in out.stderr.splitlines() if ln.strip() and "Warning" not in ln]
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr[-2000:]
    assert lines[-1].startswith("grpo-budget: error: model qwen: Qwen/Qwen2.5-0.5B-Instruct: cannot be fetched from "
                                "the Hugging Face hub")
    for fix in ("a local folder as the model's path:", "model_store", "HF_HUB_OFFLINE=1", "HF_ENDPOINT=URL",
                hub.MIRROR_ENV):
        assert fix in lines[-1], fix
    # a job loading a hub id it cannot reach says the same, in one line
    code = "from grpo_budget.generation.backends import load_tokenizer; load_tokenizer('org/never-cached')"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env={**env, "HF_HUB_OFFLINE": "1"})  # offline: the same error, without transformers' retries
    assert "UserError: org/never-cached: cannot be fetched from the Hugging Face hub" in out.stderr

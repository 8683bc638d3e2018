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

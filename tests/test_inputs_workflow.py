"""End to end, for real: what decides a result beyond the rule inputs (a user's data files and local model folder,
the settings of another clone writing the same results folder) re-runs exactly the jobs that depend on it."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
import yaml

from grpo_budget.prepare import splits
from conftest import TINY

ROOT = Path(__file__).resolve().parents[1]

sys.path.insert(0, str(Path(__file__).parent))
from test_workflow import snakemake  # noqa: E402


def planned(*args: str) -> dict[str, int]:
    """The jobs a dry run would run, by rule ({} when nothing is to be done)."""
    out = snakemake("-n", *args)
    lines = out.stdout.split("Job stats:")[1].split("\n\n")[0].splitlines()[3:] if "Job stats:" in out.stdout else []
    return {rule: int(n) for rule, n in (line.split() for line in lines) if rule not in ("all", "total")}


def local_config(root: Path, model: Path, learning_rate: float = 1e-3) -> Path:
    """tiny.yaml's task as a user's own files: GSM8K-style JSON Lines and a model folder on disk."""
    cfg = yaml.safe_load(TINY.read_text())
    ds = cfg["datasets"]["framearith"]
    frames = splits.build(dict(ds, seed=0))
    files = {}
    for split, role, n in (("pool", "train", 100), ("test", "test", 30)):
        files[role] = str(root / f"{role}.jsonl")
        if not Path(files[role]).exists():
            rows = frames[split].head(n)
            Path(files[role]).write_text("".join(json.dumps({"question": q, "answer": f"#### {a}"}) + "\n"
                                                 for q, a in zip(rows["prompt"], rows["answer"])))
    cfg["models"] = {"tiny": {"path": str(model)}}
    cfg["datasets"] = {"local": {"source": "benchmark", "benchmark": "gsm8k", "spec": {"data_files": files},
                                 "prompt": ds["prompt"], "grading": ds["grading"]}}
    cfg["training"]["learning_rate"] = learning_rate
    cfg.update(policies=["hard", "random"], results=str(root / "results"))
    path = root / f"config-{learning_rate}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


@pytest.mark.slow
def test_an_edited_input_or_another_clones_settings_rerun_exactly_what_depends_on_them(tmp_path, tiny_model_dir):
    model = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model)
    # every job up to the evaluations (the aggregates read what they read through the same inputs)
    evals = [str(tmp_path / f"results/runs/tiny/local/{p}/b0.2/s0/eval/local.parquet") for p in ("hard", "random")]
    targets = (*evals, str(tmp_path / "results/base/tiny/local.parquet"))  # before --configfile, which takes many
    config = (*targets, "--configfile", str(local_config(tmp_path, model)))
    snakemake(*config)
    assert planned(*config) == {}

    # Another clone (its own .snakemake/, which knows nothing of these outputs) with another learning rate, pointed
    # at the same results folder: its training re-runs rather than it reporting this clone's numbers (its dry run
    # changes nothing here; once it ran, the records say what made the arms: tests/test_records.py).
    clone = tmp_path / "clone"
    clone.mkdir()
    other = (*targets, "--directory", str(clone), "-s", str(ROOT / "Snakefile"),
             "--configfile", str(local_config(tmp_path, model, learning_rate=5e-3)))
    jobs = planned(*other)
    assert jobs["train"] == jobs["evaluate"] == 2
    assert not {"prepare", "score", "select", "evaluate_base"} & set(jobs)
    assert planned(*config) == {}  # its dry run wrote nothing: what this clone made is still its own

    # An edited model folder: everything that loads the model, not the data.
    cfg = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps({**cfg, "_edited": True}))
    jobs = planned(*config)
    assert {"score", "evaluate_base", "train", "evaluate"} <= set(jobs) and "prepare" not in jobs

    # An edited data file: the prepare jobs that read it (both splits come from its files).
    with open(tmp_path / "train.jsonl", "a") as f:
        f.write(json.dumps({"question": "1+2+3 = ", "answer": "#### 6"}) + "\n")
    assert planned(*config)["prepare"] == 2

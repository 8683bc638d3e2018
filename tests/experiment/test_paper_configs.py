"""The papers' grids build their full DAG without a GPU, through the SLURM profile, with the right resources."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from grpo_budget.experiment.rules import RULES

ROOT = Path(__file__).resolve().parents[2]
GPU_RULES = {name for name, rule in RULES.items() if rule.gpu}  # every one the workflow has (experiment.rules)
CPU_RULES = {"prepare", "fetch_model", "select", "summary", "table", "figure"}


def dry_run(config: str) -> tuple[dict[str, int], list[tuple[str, dict, dict]]]:
    """Job counts per rule, and (rule, wildcards, resources) of every job, from a dry run."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRPO_SLURM_")}
    out = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--profile", "profiles/slurm", "--configfile",
                          f"configs/{config}.yaml"], cwd=ROOT, capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-4000:]
    text = out.stdout + out.stderr
    counts = {}
    for line in text[text.index("Job stats:"):].splitlines()[3:]:
        parts = line.split()
        if len(parts) != 2 or not parts[1].isdigit():
            break
        counts[parts[0]] = int(parts[1])
    jobs = []
    for block in re.split(r"\n(?=(?:local)?rule \w+:)", text):
        m = re.match(r"(?:local)?rule (\w+):", block)
        if not m or m.group(1) == "all":
            continue
        fields = {}
        for key in ("wildcards", "resources"):
            found = re.search(rf"^\s+{key}: (.*)$", block, re.M)
            fields[key] = dict(kv.split("=", 1) for kv in found.group(1).split(", ")) if found else {}
        jobs.append((m.group(1), fields["wildcards"], fields["resources"]))
    return counts, jobs


@pytest.mark.parametrize(
    "config, expected",
    [
        ("hard-examples", {"fetch_model": 4, "prepare": 5, "score": 8, "select": 32, "train": 32, "evaluate": 64, "evaluate_base": 12,
                           "summary": 1, "table": 9, "figure": 7}),
        ("difficulty-limits", {"fetch_model": 3, "prepare": 5, "score": 6, "select": 54, "train": 54, "evaluate": 135, "evaluate_base": 9,
                               "summary": 1, "table": 9, "figure": 7}),
    ],
)
def test_paper_grid_dag_and_resources(config, expected):
    counts, jobs = dry_run(config)
    for rule, n in expected.items():
        assert counts[rule] == n, (rule, counts)
    assert len(jobs) == sum(n for rule, n in counts.items() if rule not in ("all", "total"))
    for rule, wildcards, res in jobs:
        gpus = int(res.get("gpu", 0) or 0)
        if rule in GPU_RULES:
            assert gpus >= 1 and res.get("gpu_model") == "a100", (rule, res)
            assert "--requeue" in res.get("slurm_extra", ""), (rule, res)
        else:
            assert rule in CPU_RULES and gpus == 0 and "gres" not in res, (rule, res)


def test_gpu_resources_scale_with_model_size():
    _, jobs = dry_run("hard-examples")
    train = {w["model"]: (int(r["mem_mb"]), int(r["runtime"])) for rule, w, r in jobs if rule == "train"}
    assert train["qwen3-4b"] < train["llama-3.1-8b"] < train["qwen3-14b"] == train["phi-4"]


def test_jobs_get_the_memory_plans_settings_and_read_the_fetched_models():
    """On an 80 GiB card: Qwen3-14B trains with checkpointing and a vLLM share that holds its second copy (0.3
    would not), every vLLM context is prompt + completion (Llama-3.1 would ask for 131,072 tokens), and every job
    reads the copy fetch_model downloaded into model_store."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRPO_SLURM_")}
    out = subprocess.run([sys.executable, "-m", "snakemake", "-n", "-p",
                          "results-hard-examples/runs/qwen3-14b/gsm8k/hard/b0.1/s0/manifest.json",
                          "results-hard-examples/base/llama-3.1-8b/gsm8k.parquet",
                          "--configfile", "configs/hard-examples.yaml"],
                         cwd=ROOT, capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    train = next(line for line in out.stdout.splitlines() if "grpo-budget" in line and " train " in line)
    assert "--model models/Qwen--Qwen3-14B " in train
    settings = json.loads(shlex.split(train)[shlex.split(train).index("--settings") + 1])
    assert settings["gradient_checkpointing"] is True and settings["device"] == "cuda"
    assert 0.3 < settings["vllm_gpu_memory_utilization"] < 0.6 and settings["vllm_max_model_length"] == 1024 + 250
    assert settings["dtype"] == "bfloat16"
    base = next(line for line in out.stdout.splitlines() if "grpo-budget" in line and " evaluate " in line)
    gen = json.loads(shlex.split(base)[shlex.split(base).index("--settings") + 1])
    assert gen["backend_kwargs"]["max_model_len"] == 1024 + 250 and gen["dtype"] == "bfloat16"
    assert "fetch_model" in out.stdout


@pytest.mark.parametrize("gib, fits", [(80, True), (40, False)])
def test_the_memory_plan_fits_an_a100_80gb_and_refuses_a_40gb_card(tmp_path, gib, fits):
    out = subprocess.run([sys.executable, "-m", "grpo_budget.cli", "plan", "--configfile", "configs/hard-examples.yaml",
                          "--config", f"results={tmp_path}", "--gpu-memory-gib", str(gib)],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    if fits:
        assert out.returncode == 0, out.stderr
        rows = [line for line in out.stdout.splitlines() if " GiB  " in line]
        assert len(rows) == 4 * 4 and all("  fits  " in r for r in rows)  # 4 models x score, train, evaluate x2
    else:
        assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1
        assert "model qwen3-14b, rule train: needs" in out.stderr and "GiB missing" in out.stderr


def test_a_gpu_constraint_pins_the_card_and_hyphenated_gpu_types_are_refused_before_any_job():
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRPO_SLURM_")}
    args = [sys.executable, "-m", "snakemake", "-n", "--profile", "profiles/slurm", "--configfile",
            "configs/hard-examples.yaml"]
    out = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env=dict(env, GRPO_SLURM_GPU_CONSTRAINT="a100_80gb"))
    gpu_jobs = [line for line in out.stdout.splitlines() if "resources:" in line and "gpu=1" in line]
    assert gpu_jobs and all("constraint=a100_80gb" in line for line in gpu_jobs)
    out = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env=dict(env, GRPO_SLURM_GPU_MODEL="nvidia_a100-sxm4-80gb"))
    assert out.returncode != 0 and "GRPO_SLURM_GPU_CONSTRAINT" in out.stderr


CONDA_ENVS = """
import sys
from pathlib import Path
from snakemake.api import SnakemakeApi
from snakemake.settings.types import ConfigSettings, ResourceSettings
with SnakemakeApi() as api:
    w = api.workflow(resource_settings=ResourceSettings(), snakefile=Path("Snakefile"), workdir=Path("."),
                     config_settings=ConfigSettings(configfiles=[Path(sys.argv[1])]))
    for r in w._workflow.rules:
        print(r.name, Path(r.conda_env).name if r.conda_env else "-")
"""


@pytest.mark.parametrize("config, gpu_env", [("configs/hard-examples.yaml", "grpo-budget-gpu.yaml"),
                                              ("config.yaml", "grpo-budget.yaml")])
def test_gpu_rules_use_the_gpu_environment_under_conda_on_device_cuda(config, gpu_env):
    out = subprocess.run([sys.executable, "-c", CONDA_ENVS, config], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    envs = dict(line.split() for line in out.stdout.splitlines() if len(line.split()) == 2)
    assert {envs[r] for r in GPU_RULES} == {gpu_env}
    assert {envs[r] for r in envs if r not in GPU_RULES and r != "all"} == {"grpo-budget.yaml"}
    gpu_yaml = (ROOT / "envs" / "grpo-budget-gpu.yaml").read_text()
    assert "python=3.13" in gpu_yaml and '"..[gpu]"' in gpu_yaml

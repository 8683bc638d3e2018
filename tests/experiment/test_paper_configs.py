"""The papers' grids build their full DAG without a GPU, through the SLURM profile, with the right resources."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GPU_RULES = {"score", "verify", "train", "evaluate_base", "evaluate"}
CPU_RULES = {"prepare", "select", "summary", "table", "figure"}


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
        ("hard-examples", {"prepare": 5, "score": 8, "select": 32, "train": 32, "evaluate": 64, "evaluate_base": 12,
                           "summary": 1, "table": 5, "figure": 5}),
        ("difficulty-limits", {"prepare": 5, "score": 6, "select": 54, "train": 54, "evaluate": 135, "evaluate_base": 9,
                               "summary": 1, "table": 5, "figure": 5}),
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

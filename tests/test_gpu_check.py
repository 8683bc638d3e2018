"""perf/gpu-check.sh, the prepared call for a GPU node, rehearsed on the CPU: installed from a wheelhouse, the memory
check, a model in a real tokenizer's shape, the plan and the DAG (dry), and the measured-against-planned table."""

import json
import os
import re
import subprocess
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "perf"))
import gpu_check  # noqa: E402


@pytest.mark.parametrize("argv, rule", [
    ("/x/bin/grpo-budget --threads 4 score --model m --pool p --out o", "score"),
    ("/x/bin/grpo-budget --threads 4 evaluate --model m --test t --out o", "evaluate_base"),
    ("/x/bin/grpo-budget --threads 4 evaluate --model m --test t --manifest f --out o", "evaluate"),
    ("/x/bin/grpo-budget --threads 1 train --subset s --model m", "train"),
    ("/x/bin/grpo-budget --threads 1 drift --model m --scores s --subset t --manifest f --out o", "drift"),
    ("/x/python -m snakemake --cores 16", None),
])
def test_each_recorded_process_is_given_its_rule(argv, rule):
    assert gpu_check.rule_of(argv) == rule


def test_the_gpu_check_rehearses_on_the_cpu_from_a_wheelhouse(tmp_path, tiny_model_dir, shared_data):
    wheelhouse = tmp_path / "wheelhouse"
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
                            str(wheelhouse), str(ROOT)], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr[-2000:]
    out = tmp_path / "out"
    env = dict(os.environ, MODE="cpu", DRY="1", OUT=str(out), WHEELHOUSE=str(wheelhouse), PYTHON=sys.executable,
               TOKENIZER=str(tiny_model_dir),
               BBH=str(shared_data / "bbh" / "tracking_shuffled_objects_three_objects.json"))
    run = subprocess.run(["bash", str(ROOT / "perf/gpu-check.sh")], capture_output=True, text=True, env=env,
                         cwd=tmp_path, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    steps = (out / "steps.log").read_text()
    assert f"grpo_budget {out}/work/site/grpo_budget" in steps  # the wheel's package, not the checkout's
    assert "memory check rc=0 (2 rows" in steps and "plan rc=0" in steps and "dry run rc=0" in steps
    assert json.loads((out / "model.json").read_text())["parameters"] > 0
    assert re.search(r"\| train \| 0 \| \d+\.\d \| - \| - \|", (out / "table.md").read_text())  # planned, not run

    # the table joins each process's recorded peak to its rule
    (out / "peaks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in [
        {"argv": "grpo-budget --threads 4 train --subset a", "wall_s": 9.0, "peak_allocated_gib": 18.8,
         "peak_reserved_gib": 19.8},
        {"argv": "grpo-budget --threads 4 train --subset b", "wall_s": 9.0, "peak_allocated_gib": 19.0,
         "peak_reserved_gib": 26.6}]))
    table = gpu_check.table(str(out / "config.yaml"), str(out / "peaks.jsonl"))
    assert re.search(r"\| train \| 2 \| \d+\.\d \| 18\.8-19\.0 \| 19\.8-26\.6 \|", table)

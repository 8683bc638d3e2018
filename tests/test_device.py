"""GPU rules on device cuda refuse to start without usable CUDA, naming why; cpu and library use run on the CPU."""

import json
import subprocess
import sys
import time

import pytest
from conftest import ROOT

from grpo_budget import device
from grpo_budget.errors import UserError


@pytest.mark.parametrize("torch_cuda, driver, expected", [
    (None, "580.65.06", "CPU build"),
    ("12.8", None, "no NVIDIA driver"),
    ("13.0", "570.133.20", "needs >= 580.65.06"),  # the resolved GPU stack on a typical A100 cluster's driver
    ("12.8", "535.216.01", None),  # CUDA 12 wheels on a 535 driver: minor version compatibility
    ("13.0", "580.82.07", None),
])
def test_cuda_problem_names_the_driver_and_the_cuda_the_wheels_need(torch_cuda, driver, expected):
    found = device.cuda_problem(torch_cuda, driver)
    assert (found is None) if expected is None else (expected in found)


def test_cuda_is_refused_on_this_machine_and_cpu_or_unset_run_on_the_cpu():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a usable GPU")
    with pytest.raises(UserError, match="device is cuda but CUDA is unusable: .*set device: cpu"):
        device.resolve("cuda")
    assert device.resolve("cpu") == device.resolve(None) == "cpu"


@pytest.mark.parametrize("command", ["score", "train"])
def test_a_cuda_job_fails_in_its_first_seconds_in_one_line(tmp_path, tiny_model_dir, command):
    """No silent CPU fallback: the job stops before it loads the model, with one line and exit status 2."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a usable GPU")
    from grpo_budget.prepare import framearith

    framearith.generate(8, seed=0, width=4, min_ops=1, max_ops=3).to_parquet(tmp_path / "items.parquet")
    dataset = json.dumps({"source": "builtin", "generator": "framearith"})
    settings = json.dumps({"device": "cuda"})
    if command == "score":
        args = ["score", "--model", str(tiny_model_dir), "--pool", str(tmp_path / "items.parquet"),
                "--settings", settings, "--dataset", dataset, "--out", str(tmp_path / "s.parquet")]
    else:
        args = ["train", "--subset", str(tmp_path / "items.parquet"), "--model", str(tiny_model_dir),
                "--checkpoints", str(tmp_path / "ck"), "--settings", settings, "--dataset", dataset, "--seed", "0",
                "--log-out", str(tmp_path / "log.parquet"), "--manifest-out", str(tmp_path / "m.json")]
    start = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "grpo_budget.cli", *args], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 2, out.stderr[-2000:]
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("grpo-budget: error: device is cuda but CUDA is unusable"), out.stderr[-2000:]
    assert "Traceback" not in out.stderr
    assert time.monotonic() - start < 120  # seconds (imports), not the job's time limit


@pytest.mark.parametrize("user", [None, ("PYTORCH_CUDA_ALLOC_CONF", "max_split_size_mb:128"),
                                  ("PYTORCH_ALLOC_CONF", "garbage_collection_threshold:0.6")])
def test_every_job_starts_with_expandable_segments_unless_the_user_configured_the_allocator(user):
    """The H200 score job reserved 138.9 GiB for 36.5 GiB allocated; a job's process gets the allocator setting
    before torch loads, and a user's own setting (under either of torch's names) is left as it is."""
    import os

    env = {k: v for k, v in os.environ.items() if k not in device.ALLOCATOR_VARIABLES}
    if user:
        env[user[0]] = user[1]
    probe = ("import os, sys; from grpo_budget import cli; rc = cli.main(['validate-config', 'config.yaml']); "
             "print(rc, os.environ.get('PYTORCH_CUDA_ALLOC_CONF'), os.environ.get('PYTORCH_ALLOC_CONF'))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, env=env)
    rc, cuda_conf, conf = out.stdout.split()[-3:]
    assert rc == "0", out.stderr
    if user is None:
        assert (cuda_conf, conf) == ("expandable_segments:True", "None")
    else:
        assert {"PYTORCH_CUDA_ALLOC_CONF": cuda_conf, "PYTORCH_ALLOC_CONF": conf}[user[0]] == user[1]
        assert "expandable_segments:True" not in (cuda_conf, conf)

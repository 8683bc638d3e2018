"""grpo-budget doctor: each check's verdict on known inputs, and the command on this machine."""

import subprocess
import sys

from conftest import ROOT

from grpo_budget.cluster import doctor
from grpo_budget.experiment.config import load

SINFO = "gpu*|gpu:a100:4(S:0-1)|a100_80gb,ib\ngpu40|gpu:a100:8|a100_40gb\ncpu|(null)|(null)\n"


def test_cuda_check():
    assert doctor.check_cuda("2.13.0", "13.0", "570.86.15").status == "FAIL"
    assert doctor.check_cuda("2.13.0+cpu", None, None).status == "FAIL"
    assert doctor.check_cuda("2.13.0", "13.0", None).status == "warn"  # a login node without a driver
    assert doctor.check_cuda("2.9.1", "12.8", "535.54.03").status == "ok"


def test_slurm_check_reads_partitions_gres_and_features():
    assert doctor.parse_sinfo(SINFO) == {"gpu": ["gpu:a100:4(S:0-1)", "a100_80gb,ib"], "gpu40": ["gpu:a100:8",
                                         "a100_40gb"], "cpu": []}
    assert doctor.check_slurm(SINFO, "", "a100", "a100_80gb").status == "ok"
    assert "h100" in doctor.check_slurm(SINFO, "gpu", "h100", "").detail
    assert doctor.check_slurm(SINFO, "gpu40", "a100", "a100_80gb").status == "FAIL"  # that partition has 40 GB
    assert doctor.check_slurm(SINFO, "nope", "", "").status == "FAIL"
    assert doctor.check_slurm("cpu|(null)|(null)\n", "", "", "").status == "FAIL"
    assert doctor.check_slurm(None, "", "", "").status == "warn"


def test_plugin_and_gpu_checks():
    assert doctor.check_plugin("2.8.0").status == "ok"
    assert "--ntasks-per-gpu" in doctor.check_plugin("2.6.1").detail
    assert doctor.check_plugin(None).status == "FAIL"
    assert doctor.check_gpus([("NVIDIA A100-SXM4-40GB", 39.4)], 80).status == "FAIL"
    assert doctor.check_gpus([("NVIDIA A100-SXM4-80GB", 79.2)], 80).status == "ok"


def test_model_checks_name_the_store_and_the_token(tmp_path):
    cfg = load(ROOT / "configs" / "hard-examples.yaml")
    cfg["model_store"] = str(tmp_path)
    (tmp_path / "Qwen--Qwen3-4B").mkdir()
    (tmp_path / "Qwen--Qwen3-4B" / ".fetched").write_text("Qwen/Qwen3-4B\n")
    checks = {(c.what, c.status) for c in doctor.check_models(cfg, token=None)}
    assert ("model qwen3-4b", "ok") in checks and ("model qwen3-14b", "warn") in checks
    assert ("model llama-3.1-8b", "FAIL") in checks  # gated, no HF_TOKEN
    assert ("model llama-3.1-8b", "FAIL") not in {(c.what, c.status) for c in doctor.check_models(cfg, token="x")}


def test_doctor_prints_one_line_per_check_and_fails_on_this_cpu_machine():
    out = subprocess.run([sys.executable, "-m", "grpo_budget.cli", "doctor", "--configfile",
                          "configs/hard-examples.yaml"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    lines = out.stdout.strip().splitlines()
    assert out.returncode == 1 and all(line.split()[0] in ("ok", "warn", "FAIL") for line in lines)
    assert any(line.startswith("ok    memory plan") for line in lines)


def test_a_cpu_config_skips_what_it_does_not_use(monkeypatch):
    """Issue 55: `doctor` on a device: cpu config reported FAIL for CUDA and SLURM and exited 1."""
    monkeypatch.setattr(doctor, "_run", lambda cmd: None)  # no sinfo: not a SLURM node
    checks = doctor.run(load(ROOT / "tests" / "configs" / "tiny.yaml"))
    by = {c.what: c.status for c in checks}
    assert by["CUDA"] == by["GPUs here"] == by["SLURM"] == by["SLURM plugin"] == "skip"
    assert "FAIL" not in by.values() and by["memory plan"] == "ok"
    monkeypatch.setattr(doctor, "_run", lambda cmd: "cpu*|(null)|(null)\n")  # a CPU-only cluster
    slurm = next(c for c in doctor.run(load(ROOT / "tests" / "configs" / "tiny.yaml")) if c.what == "SLURM")
    assert slurm.status == "ok" and "partitions cpu" in slurm.detail
    out = subprocess.run([sys.executable, "-m", "grpo_budget.cli", "doctor", "--configfile", "tests/configs/tiny.yaml"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "FAIL" not in out.stdout, out.stdout

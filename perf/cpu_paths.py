"""Which CPU code path trains which tiny model: a digest of the weights ``grpo-budget bootstrap-model`` trains (40
steps, one thread) under each setting of the kernel variables, with the processor's vendor and model.

    .venv/bin/python perf/cpu_paths.py

Two machines reproduce each other's embedded default exactly when their ``pinned`` digests are equal. Run it on
a machine of another kind and compare with the digests in docs/results.md (reproducibility across machines): a
setting whose digest is the same on an Intel and an AMD processor is a pin that would make both agree.
tests/test_reproducible.py trains with the same settings.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

from grpo_budget.reproducible import PINS, SWITCH

DATASET = {"generator": "frame_arithmetic", "params": {"width": 6, "min_ops": 1, "max_ops": 6},
           "grading": {"mode": "lenient", "pattern": r"=\s*(-?\d+)"}}
SETTINGS = {"dataset": "framearith", "hidden_size": 64, "intermediate_size": 256, "num_layers": 2, "num_heads": 2,
            "max_steps": 40, "calib_every": 40, "sparse_calib_every": 40, "calib_items": 16, "calib_samples": 2,
            "train_items": 2000, "batch_size": 32, "seed": 0}
# Each setting on top of the CLI's own pins (a variable set here is kept by them).
SETTINGS_TRIED = {
    "pinned": {},
    "pinned, MKL_CBWR=COMPATIBLE": {"MKL_CBWR": "COMPATIBLE"},
    "pinned, MKL_CBWR=AUTO": {"MKL_CBWR": "AUTO"},
    "pinned, ATEN_CPU_CAPABILITY=default": {"ATEN_CPU_CAPABILITY": "default"},
    "pinned, ATEN default, MKL_CBWR=COMPATIBLE": {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE"},
    "native": {SWITCH: "native"},
}


def weights(tmp: Path, name: str, env: dict) -> str:
    """The tiny model ``grpo-budget bootstrap-model`` trains under ``env``: a digest of its weights."""
    out = tmp / name
    run_env = {k: v for k, v in os.environ.items() if k not in (*PINS, SWITCH, "MKL_ENABLE_INSTRUCTIONS")} | env
    subprocess.run([sys.executable, "-m", "grpo_budget.cli", "--threads", "1", "bootstrap-model", "--dataset",
                    json.dumps(DATASET), "--settings", json.dumps(SETTINGS), "--out", str(out)],
                   check=True, capture_output=True, env=run_env)
    return hashlib.sha256((out / "model.safetensors").read_bytes()).hexdigest()


def processor() -> str:
    """The processor's model name as /proc/cpuinfo gives it (else ``platform.processor()``)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main() -> None:
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()
    import torch

    print(f"processor: {processor()}; torch {torch.__version__}, native kernels "
          f"{torch.backends.cpu.get_cpu_capability()}")
    with tempfile.TemporaryDirectory() as tmp:
        for i, (name, env) in enumerate(SETTINGS_TRIED.items()):
            print(f"{name:45s} {weights(Path(tmp), str(i), env)[:8]}", flush=True)


if __name__ == "__main__":
    main()

"""Where a GPU stage runs: the config's ``device``, and a clear error in a job's first seconds when ``cuda`` is asked
for but unusable (a CPU build of torch, no driver, a driver older than the wheels' CUDA needs) -- never a silent
fallback to the CPU that runs a 14B job until its time limit."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import MutableMapping
from pathlib import Path

from grpo_budget.errors import UserError

# The oldest Linux driver each CUDA major version runs on (NVIDIA's CUDA Toolkit release notes, table 3: "minor
# version compatibility"); a wheel built for CUDA 12.8 runs on a 12.x driver >= 525.60.13.
MIN_DRIVER = {11: "450.80.02", 12: "525.60.13", 13: "580.65.06"}
# GPU jobs grow tensors step by step (transformers' KV cache by concatenation): with fixed segments the caching
# allocator kept reserving new blocks, 138.9 GiB reserved for 36.5 GiB allocated in one H200 score job, and ran out
# of memory under a 40 GiB cap with 5.2 GiB reserved but unused (../shared/gpu/README.md). Expandable segments grow
# one mapping instead. (vLLM refuses them with its sleep mode, which no job here turns on: a user who passes it in
# backend_kwargs sets PYTORCH_CUDA_ALLOC_CONF to their own value, which is kept.)
ALLOCATOR = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
ALLOCATOR_VARIABLES = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF")  # torch >= 2.9 reads either name


def configure_allocator(environ: MutableMapping[str, str] = os.environ) -> dict[str, str]:
    """Set the CUDA caching allocator's configuration for a job (before torch is imported), unless the user set
    their own under either name; returns what it set."""
    if any(v in environ for v in ALLOCATOR_VARIABLES):
        return {}
    environ.update(ALLOCATOR)
    return dict(ALLOCATOR)


def driver_version() -> str | None:
    """The NVIDIA kernel driver's version, or None without one."""
    proc = Path("/proc/driver/nvidia/version")
    if proc.is_file():
        m = re.search(r"Kernel Module\s+(?:for \S+\s+)?(\d+\.\d+(?:\.\d+)?)", proc.read_text())
        if m:
            return m.group(1)
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return None
    return out[0] if out else None


def _version(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v))


def cuda_problem(torch_cuda: str | None, driver: str | None) -> str | None:
    """Why CUDA cannot work with this torch build (its CUDA version, None for a CPU build) and driver, if it is
    known from them alone; None when the two agree."""
    if torch_cuda is None:
        return "the installed torch is a CPU build (torch.version.cuda is None): install the GPU stack (docs/cluster-and-gpu.md)"
    if driver is None:
        return f"no NVIDIA driver on this machine (torch is built for CUDA {torch_cuda}): run GPU jobs on a GPU node"
    need = MIN_DRIVER.get(_version(torch_cuda)[0])
    if need and _version(driver) < _version(need):
        return (f"the NVIDIA driver is {driver}, but torch's CUDA {torch_cuda} needs >= {need}: install the CUDA-12 "
                "wheels (docs/cluster-and-gpu.md) or ask for nodes with a newer driver")
    return None


def resolve(device: str | None) -> str:
    """The device a job runs on: ``cpu``; ``cuda``, refused with the reason when unusable; None: what there is."""
    import torch

    if device == "cpu":
        return "cpu"
    if torch.cuda.is_available():
        return "cuda"
    if device is None:
        return "cpu"
    reason = cuda_problem(torch.version.cuda, driver_version()) or (
        f"torch (CUDA {torch.version.cuda}) sees no usable GPU with driver {driver_version()} "
        "(CUDA_VISIBLE_DEVICES, the job's GPU request)")
    raise UserError(f"device is cuda but CUDA is unusable: {reason}; set device: cpu to run on the CPU")

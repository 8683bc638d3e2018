"""``grpo-budget doctor``: checks a cluster before its first run, from a login node -- the driver against the wheels'
CUDA, the GPUs and partitions SLURM offers, the SLURM plugin's version, the model store and hub token, and the
config's memory plan. One line per check: ``ok``, ``warn`` or ``FAIL`` with what to do, or ``skip`` for what the
config does not use (on device cpu: CUDA, the GPUs, and SLURM where this is no SLURM node)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from grpo_budget import device, hub
from grpo_budget.cluster import memory_plan
from grpo_budget.cluster.jobs import host_memory_gib
from grpo_budget.errors import UserError
from grpo_budget.generation import sandbox
from grpo_budget.prepare.benchmarks import BENCHMARKS

PLUGIN = "snakemake-executor-plugin-slurm"
PLUGIN_TESTED = "2.8."  # the profile (profiles/slurm) is tested with this series
GATED = ("meta-llama/",)  # hub organisations whose models need an accepted licence and a token


@dataclass(frozen=True)
class Check:
    status: str  # ok | warn | FAIL | skip (what the config does not use)
    what: str
    detail: str

    def line(self) -> str:
        return f"{self.status:<4}  {self.what}: {self.detail}"


def check_cuda(torch_version: str, torch_cuda: str | None, driver: str | None) -> Check:
    problem = device.cuda_problem(torch_cuda, driver)
    if problem and torch_cuda and driver is None:  # a login node: nothing to compare the wheels with here
        return Check("warn", "CUDA", f"torch {torch_version}: {problem} (srun --gpus=1 grpo-budget doctor checks one)")
    if problem:
        return Check("FAIL", "CUDA", f"torch {torch_version}: {problem}")
    return Check("ok", "CUDA", f"torch {torch_version} built for CUDA {torch_cuda}, driver {driver}")


def check_gpus(names: list[tuple[str, float]], memory_gib: float) -> Check:
    """The GPUs this machine sees (name, GiB) against the card the memory plan assumes."""
    if not names:
        return Check("warn", "GPUs here", "none visible (fine on a login node; run doctor in a GPU job to check one)")
    small = [n for n, gib in names if gib < memory_gib * 0.97]
    listed = ", ".join(f"{n} ({gib:.0f} GiB)" for n, gib in names)
    if small:
        return Check("FAIL", "GPUs here", f"{listed}: smaller than gpu.memory_gib {memory_gib:g}; lower it or pin the "
                     "card with GRPO_SLURM_GPU_CONSTRAINT")
    return Check("ok", "GPUs here", listed)


def parse_sinfo(text: str) -> dict[str, list[str]]:
    """``sinfo -h -o "%P|%G|%f"`` lines -> partition: its GRES and feature entries."""
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) >= 2:
            out.setdefault(parts[0].rstrip("*"), []).extend(p for p in parts[1:] if p and p != "(null)")
    return out


def check_slurm(sinfo: str | None, partition: str, gpu_model: str, constraint: str) -> Check:
    if sinfo is None:
        return Check("warn", "SLURM", "sinfo not found: not a SLURM login node (the slurm profile needs one)")
    parts = parse_sinfo(sinfo)
    gpu_parts = {p: g for p, g in parts.items() if any("gpu" in x for x in g)}
    if partition and partition not in parts:
        return Check("FAIL", "SLURM", f"partition {partition!r} (GRPO_SLURM_GPU_PARTITION) is not one of "
                     f"{', '.join(sorted(parts))}")
    if not gpu_parts:
        return Check("FAIL", "SLURM", "no partition offers GPUs (sinfo GRES): set GRPO_SLURM_GPUS=0 for a CPU run")
    wanted = [p for p in ([partition] if partition else gpu_parts) if p in gpu_parts]
    for label, value in (("GPU type", gpu_model), ("feature", constraint)):
        if value and not any(value in x for p in wanted for x in gpu_parts[p]):
            return Check("FAIL", "SLURM", f"{label} {value!r} appears in no GPU partition's GRES or features "
                         f"({_listing(gpu_parts)})")
    return Check("ok", "SLURM", f"GPU partitions {_listing(gpu_parts)}")


def _listing(parts: dict[str, list[str]]) -> str:
    return "; ".join(f"{p}: {' '.join(g)}" for p, g in sorted(parts.items()))


def check_plugin(version: str | None) -> Check:
    if version is None:
        return Check("FAIL", "SLURM plugin", f"{PLUGIN} is not installed: pip install -e '.[slurm]' (the tested "
                     "version; .[gpu] includes it)")
    if not version.startswith(PLUGIN_TESTED):
        return Check("FAIL", "SLURM plugin", f"{PLUGIN} {version}, but profiles/slurm is tested with "
                     f"{PLUGIN_TESTED}x (2.6 adds --ntasks-per-gpu, which some clusters reject): pip install -e '.[slurm]'")
    return Check("ok", "SLURM plugin", f"{PLUGIN} {version}")


def check_models(config: dict, token: str | None) -> list[Check]:
    out = []
    for name, spec in config["models"].items():
        path = spec.get("path")
        if path is None:
            continue
        if hub.fetched(config, name):
            folder = Path(hub.store_folder(config["model_store"], path))
            done = (folder / hub.COMPLETE).is_file()
            out.append(Check("ok" if done else "warn", f"model {name}",
                             f"{folder} fetched" if done else f"{path} not fetched yet into {folder}: the fetch_model "
                             "rule downloads it before its jobs (or run grpo-budget fetch-models here now)"))
        elif hub.is_hub_id(path):
            out.append(Check("warn", f"model {name}", f"{path} is loaded from the hub by every job: compute nodes "
                             "need network access (set model_store to fetch it once)"))
        if path.startswith(GATED) and hub.is_hub_id(path) and not token:
            out.append(Check("FAIL", f"model {name}", f"{path} is gated: accept its licence on huggingface.co and "
                             "export HF_TOKEN"))
    return out


def check_memory(config: dict) -> Check:
    try:
        budgets = memory_plan.check_config(config)
    except UserError as e:
        return Check("FAIL", "memory plan", str(e))
    if config["device"] != "cuda":
        return Check("ok", "memory plan", f"device cpu: {len(budgets)} training jobs fit this machine's "
                     f"{host_memory_gib():.0f} GiB (a GGUF model is sized once converted)")
    return Check("ok", "memory plan", f"{len(budgets)} GPU rules fit a {config['gpu']['memory_gib']:g} GiB card "
                 "(grpo-budget plan prints them)")


def check_sandbox(config: dict) -> Check:
    """Whether code answers can be graded here (grpo_budget.generation.sandbox): namespaces, and the limits."""
    coded = any((BENCHMARKS[ds["benchmark"]].answer_type if ds.get("benchmark") in BENCHMARKS
                 else ds.get("answer_type")) == "code" for ds in config["datasets"].values())
    why = sandbox.problem()
    if why:
        return Check("FAIL" if coded else "warn", "code sandbox", f"refused here: {why} (code benchmarks cannot be "
                     "graded on this machine; docs/sandbox.md)")
    return Check("ok", "code sandbox", "user, network (no interface up), mount and PID namespaces via unshare, "
                 f"python {sandbox.tools()['python']}; limits: {sandbox.describe()}")


def _run(cmd: list[str]) -> str | None:
    if shutil.which(cmd[0]) is None:
        return None
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None


def _visible_gpus() -> list[tuple[str, float]]:
    import torch

    if not torch.cuda.is_available():
        return []
    return [(torch.cuda.get_device_name(i), torch.cuda.get_device_properties(i).total_memory / 2**30)
            for i in range(torch.cuda.device_count())]


def _plugin_version() -> str | None:
    try:
        return metadata.version(PLUGIN)
    except metadata.PackageNotFoundError:
        return None


def check_cpu_slurm(sinfo: str | None) -> Check:
    """On device cpu: the partitions of a SLURM machine (no GPU needed), or a skip where there is none."""
    if sinfo is None:
        return Check("skip", "SLURM", "device cpu and no sinfo here: runs on this machine, no cluster needed")
    parts = parse_sinfo(sinfo)
    return Check("ok", "SLURM", f"partitions {', '.join(sorted(parts)) or 'none'} (device cpu: the slurm profile with "
                 "GRPO_SLURM_GPUS=0 runs every job on CPU nodes)")


def _only_warn(c: Check) -> Check:
    """A device cpu run on a SLURM node may not use the cluster at all: what only the profile needs is a warning."""
    return Check("warn", c.what, c.detail + " (only the slurm profile needs it)") if c.status == "FAIL" else c


def run(config: dict) -> list[Check]:
    """Every check, in the order a first run meets them; on device cpu, what a CPU run does not use is skipped
    (CUDA and the GPUs; SLURM and its plugin where this machine is no SLURM node)."""
    import torch

    env = os.environ.get
    sinfo = _run(["sinfo", "-h", "-o", "%P|%G|%f"])
    cpu = config["device"] != "cuda"
    skipped = "device cpu: this config uses no GPU"
    steps: list[Callable[[], Check | list[Check]]] = [
        lambda: Check("skip", "CUDA", skipped) if cpu else
        check_cuda(torch.__version__, torch.version.cuda, device.driver_version()),
        lambda: Check("skip", "GPUs here", skipped) if cpu else check_gpus(_visible_gpus(), config["gpu"]["memory_gib"]),
        lambda: check_cpu_slurm(sinfo) if cpu else
        check_slurm(sinfo, env("GRPO_SLURM_GPU_PARTITION", ""), env("GRPO_SLURM_GPU_MODEL", "a100"),
                    env("GRPO_SLURM_GPU_CONSTRAINT", "")),
        lambda: Check("skip", "SLURM plugin", "device cpu and no SLURM here") if cpu and sinfo is None else
        _only_warn(check_plugin(_plugin_version())) if cpu else check_plugin(_plugin_version()),
        lambda: check_models(config, env("HF_TOKEN")),
        lambda: check_memory(config),
        lambda: check_sandbox(config),
    ]
    out: list[Check] = []
    for step in steps:
        found = step()
        out += found if isinstance(found, list) else [found]
    return out

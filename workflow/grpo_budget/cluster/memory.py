"""The memory plan: the GPU memory of every GPU job (weights, LoRA and optimizer state, activations, vLLM's copy and
KV cache) on the configured card, the job settings that fit, or a one-line refusal before any job is submitted.

Estimates, checked against measurements (``perf/gpu-check.sh`` measures them on a GPU): activations count the tensors
autograd keeps for the backward pass (:mod:`grpo_budget.cluster.activations`); vLLM's
overhead is its profiling run (TRL's ``max_num_batched_tokens`` 4096) plus the sampler's logits and a fixed reserve
for CUDA graphs; every process also holds a CUDA context.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from grpo_budget.cluster.activations import training_step
from grpo_budget.cluster.shapes import Shape, dtype_bytes
from grpo_budget.errors import UserError

if TYPE_CHECKING:  # annotations only: this module imports no registry, so perf/memory_check.py runs on a bare node
    from grpo_budget.config.settings import Gpu, Training

GIB = 2**30
CONTEXT = 1.0 * GIB  # CUDA context, cuBLAS workspace and allocator slack of one process
PROCESS = 1.5 * GIB  # device cpu: a training job's interpreter, torch, transformers, TRL and allocator slack
VLLM_RESERVE = 1.0 * GIB  # vLLM's CUDA graphs and non-torch allocations
VLLM_PROFILE_TOKENS = 4096  # TRL's colocate engine: max_num_batched_tokens
VLLM_DEFAULT_UTILIZATION = 0.9  # vLLM's gpu_memory_utilization default (scoring and evaluation engines)
UTILIZATION_STEP = 0.01
AUTO_HEADROOM = 0.9  # auto settings leave a tenth of the card to spare (allocator slack; the plan is an estimate)


@dataclass
class Budget:
    """One job's GPU memory (bytes) by part, and the settings the plan chose for it."""

    model: str
    rule: str
    card: float
    parts: dict[str, float] = field(default_factory=dict)
    settings: dict = field(default_factory=dict)
    note: str = ""
    problem: str = ""  # why the job cannot start whatever the total (vLLM without room for one sequence)
    device: str = "cuda"  # cpu: ``card`` is this machine's memory

    @property
    def total(self) -> float:
        return sum(self.parts.values())

    @property
    def fits(self) -> bool:
        return self.total <= self.card and not self.problem

    def line(self) -> str:
        parts = ", ".join(f"{k} {v / GIB:.1f}" for k, v in self.parts.items() if v)
        chosen = ", ".join(f"{k}={v}" for k, v in self.settings.items())
        verdict = "fits" if self.fits else f"DOES NOT FIT: {self.shortfall()}"
        return (f"{self.model:<16} {self.rule:<14} {self.total / GIB:6.1f} of {self.card / GIB:.0f} GiB  {verdict}"
                f"  ({parts}){'; ' + chosen if chosen else ''}{'; ' + self.note if self.note else ''}")

    def refusal(self) -> str:
        parts = ", ".join(f"{k} {v / GIB:.1f}" for k, v in self.parts.items() if v)
        where = (f"GPU memory ({parts}) on a {self.card / GIB:.0f} GiB card (gpu.memory_gib)" if self.device == "cuda"
                 else f"memory ({parts}) on this machine's {self.card / GIB:.0f} GiB (device cpu)")
        return (f"model {self.model}, rule {self.rule}: needs {self.total / GIB:.1f} GiB of {where}: "
                f"{self.shortfall()}{'; ' + self.note if self.note else ''}")

    def shortfall(self) -> str:
        return self.problem or f"{(self.total - self.card) / GIB:.1f} GiB missing"


def vllm_engine(shape: Shape, b: int, max_num_seqs: int, max_lora_rank: int = 0) -> dict[str, float]:
    """vLLM's memory besides its KV cache: its copy of the weights, its profiling activations, the sampler's
    float32 logits for every sequence, CUDA graphs, and one LoRA slot at ``max_lora_rank`` when adapters load."""
    profile = VLLM_PROFILE_TOKENS * b * (4 * shape.hidden + 2 * shape.intermediate)
    parts = {"vLLM weights": shape.parameters() * b,
             "vLLM overhead": profile + max_num_seqs * shape.vocab * 4 + VLLM_RESERVE}
    if max_lora_rank:
        parts["vLLM LoRA slot"] = shape.lora_parameters(max_lora_rank, "all-linear") * b
    return parts


def plan_train(name: str, shape: Shape, t: Training, gpu: Gpu, dtype: str, on_vllm: bool,
               device: str = "cuda", micro_batch: int | None = None) -> Budget:
    """The training job: the policy's weights, LoRA state, activations of one micro-batch (``micro_batch``
    completions: the training method's, by default TRL's per-device batch) and, with TRL's colocate vLLM, its
    engine and KV cache. ``auto`` settings take the smallest memory that holds a whole generation batch:
    checkpointing off where its activations fit, vLLM's share just large enough for every sequence of a step.
    On device cpu the card is ``gpu.memory_gib`` set to this machine's memory (the caller's) and the CUDA context
    is the process's own footprint."""
    card = gpu.memory_gib * GIB
    b = dtype_bytes(dtype, shape)
    per_device = t.per_device_batch if micro_batch is None else micro_batch
    seq = gpu.max_prompt_tokens + t.max_completion_length
    adapted = None if t.lora.layers is None else t.lora.layers[1] - t.lora.layers[0] + 1
    process = {"CUDA context": CONTEXT} if device == "cuda" else {"process": PROCESS}

    def step(checkpointing: bool) -> dict[str, float]:
        return dict(training_step(shape, per_device, seq, t.max_completion_length, b, checkpointing, t.lora.r,
                                  t.lora.target_modules, lora_layers=adapted), **process)

    settings: dict = {}
    vllm: dict[str, float] = {}
    kv_min = kv_all = 0.0
    if on_vllm:
        # TRL: max_num_seqs = per-device batch x steps_per_generation
        seqs = t.per_device_batch * t.gradient_accumulation_steps
        vllm = vllm_engine(shape, b, seqs)
        kv_min, kv_all = shape.kv_bytes_per_token(b) * seq, shape.kv_bytes_per_token(b) * seq * seqs
        settings["vllm_max_model_length"] = seq
    choices = [t.gradient_checkpointing] if t.gradient_checkpointing != "auto" else [False, True]
    for checkpointing in choices:
        parts = step(checkpointing)
        if on_vllm:
            engine = sum(vllm.values())
            if t.vllm_gpu_memory_utilization == "auto":
                room = card - sum(parts.values())  # what training leaves for vLLM
                share = min(engine + kv_all, max(room, engine + kv_min))
                util = min(0.95, _ceil_step(share / card))
            else:
                util = t.vllm_gpu_memory_utilization
            kv = util * card - engine
            parts.update(vllm, **{"vLLM KV cache": max(kv, kv_min)})
            settings["vllm_gpu_memory_utilization"] = util
        budget = Budget(name, "train", card, parts, dict(settings, gradient_checkpointing=checkpointing),
                        device=device)
        if on_vllm and kv < kv_min:
            budget.problem = _no_sequence(util, card, kv, kv_min, seq, "training.vllm_gpu_memory_utilization")
        if on_vllm and budget.fits:
            budget.note = f"KV cache for {int(parts['vLLM KV cache'] // kv_min)} of {seqs} sequences of {seq} tokens"
        roomy = budget.total <= AUTO_HEADROOM * card or checkpointing or len(choices) == 1
        if budget.fits and roomy:
            if checkpointing and len(choices) == 2:
                off = step(False)["activations"] - parts["activations"]  # the only part checkpointing changes
                budget.note += f"{'; ' if budget.note else ''}checkpointing off would need {off / GIB:.1f} GiB more"
            return budget
    if not budget.problem and parts["activations"] > budget.total - budget.card:
        budget.note = (f"a micro-batch is {per_device} completions of up to {seq} tokens: raise "
                       "training.gradient_accumulation_steps" + ("" if budget.settings["gradient_checkpointing"]
                                                                 else " or set gradient_checkpointing: auto"))
    return budget


def plan_generate(name: str, rule: str, shape: Shape, gpu: Gpu, dtype: str, backend: str, batch_size: int,
                  max_new_tokens: int, backend_kwargs: dict, max_lora_rank: int) -> Budget:
    """A scoring, verification or evaluation job: vLLM's share of the card (``gpu_memory_utilization``) must hold
    its weights, overhead and one sequence of ``max_model_len`` tokens; transformers holds the weights and the KV
    cache of a whole batch, lowered where it would take more than ``AUTO_HEADROOM`` of the card (the cache grows by
    concatenation, which the allocator needs room for)."""
    card = gpu.memory_gib * GIB
    b = dtype_bytes(dtype, shape)
    seq = gpu.max_prompt_tokens + max_new_tokens
    kv_token = shape.kv_bytes_per_token(b)
    if backend == "vllm":
        util = float(backend_kwargs.get("gpu_memory_utilization", VLLM_DEFAULT_UTILIZATION))
        engine = vllm_engine(shape, b, 256, max_lora_rank)  # vLLM's max_num_seqs default: 256
        kv = util * card - sum(engine.values())
        parts = dict(engine, **{"vLLM KV cache": max(kv, kv_token * seq), "CUDA context": CONTEXT})
        parts["unused share"] = max(0.0, card - util * card - CONTEXT)  # vLLM takes only its share
        budget = Budget(name, rule, card, parts, {"max_model_len": backend_kwargs.get("max_model_len", seq)})
        if kv >= kv_token * seq:
            budget.note = f"KV cache for {int(kv // (kv_token * seq))} sequences of {seq} tokens"
        else:
            budget.problem = _no_sequence(util, card, kv, kv_token * seq, seq, "backend_kwargs.gpu_memory_utilization")
        return budget
    fixed = {"weights": shape.parameters() * b, "CUDA context": CONTEXT}
    per_sequence = kv_token * seq + shape.vocab * 4  # its KV cache and its float32 logits at a step
    fits = int((AUTO_HEADROOM * card - sum(fixed.values())) // per_sequence)
    batch = max(1, min(batch_size, fits))
    parts = dict(fixed, **{"KV cache": kv_token * seq * batch, "logits": batch * shape.vocab * 4})
    budget = Budget(name, rule, card, parts, {"batch_size": batch})
    if batch < batch_size:
        budget.note = (f"batch_size {batch_size} lowered to {batch}: the most sequences of {seq} tokens whose KV cache "
                       f"fits in {AUTO_HEADROOM:.0%} of the card")
    return budget


def _no_sequence(util: float, card: float, kv: float, need: float, seq: int, setting: str) -> str:
    """vLLM refuses to start ("No available memory for the cache blocks" or a too-long max_model_len)."""
    return (f"vLLM's share {util:.2f} x {card / GIB:.0f} GiB leaves {kv / GIB:.1f} GiB of KV cache, below one sequence "
            f"of {seq} tokens ({need / GIB:.2f} GiB): vLLM would not start; raise {setting} or lower the lengths")


def _ceil_step(x: float) -> float:
    return round(-(-x // UTILIZATION_STEP) * UTILIZATION_STEP, 2)


def check(budgets: list[Budget]) -> None:
    """Refuse the first job that does not fit, in one line."""
    for b in budgets:
        if not b.fits:
            raise UserError(b.refusal())


def render(budgets: list[Budget], gpu: Gpu, device: str = "cuda") -> str:
    card = (f"one {gpu.memory_gib:g} GiB card per GPU job (gpu.memory_gib)" if device == "cuda"
            else f"this machine's {gpu.memory_gib:.0f} GiB per training job (device cpu)")
    head = f"Memory plan: {card}, prompts up to {gpu.max_prompt_tokens} tokens (gpu.max_prompt_tokens); GiB"
    return "\n".join([head, *(b.line() for b in budgets)])

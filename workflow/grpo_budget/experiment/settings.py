"""Typed settings of each stage, read from the validated config.

The schema (``workflow/grpo_budget/schemas/config.schema.yaml``) is the one source of defaults: a settings object is built from
a config section whose missing fields the schema fills in (:func:`grpo_budget.experiment.schema.fill`), never from defaults
restated here. ``tests/experiment/test_config.py`` checks that every class has exactly its schema section's fields.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from grpo_budget.experiment import schema
from grpo_budget.train.methods import PREFIXES

# What a job's settings carry besides its config section: the model's properties and the config's device, and the
# memory plan's vLLM context length (training on cuda).
JOB_EXTRAS = ("chat_template_kwargs", "dtype", "device", "vllm_max_model_length")


def _build(cls, pointer: tuple[str, ...], values: dict | None, **extra: Any):
    full = schema.fill(pointer, values or {})
    names = {f.name for f in fields(cls)}
    return cls(**{k: v for k, v in full.items() if k in names}, **extra)


@dataclass(frozen=True)
class Lora:
    r: int
    alpha: int
    dropout: float
    target_modules: str | list[str]
    layers: list[int] | None = None  # [start, end] of the decoder layers to adapt; None: all


@dataclass(frozen=True)
class Training:
    """The config's ``training`` section (plus the model's ``chat_template_kwargs``)."""

    num_generations: int
    prompts_per_step: int
    gradient_accumulation_steps: int
    learning_rate: float
    lr_scheduler_type: str
    warmup_ratio: float
    weight_decay: float
    adam_beta1: float
    adam_beta2: float
    max_grad_norm: float
    max_steps: int
    save_steps: int
    max_completion_length: int
    beta: float
    temperature: float
    top_p: float
    top_k: int | None  # 0: no cut; None: the model's generation_config decides, as in scoring
    loss_type: str
    scale_rewards: str
    bf16: bool
    gradient_checkpointing: bool | str  # "auto": the memory plan decides (grpo_budget.cluster.memory)
    use_vllm: bool
    vllm_mode: str
    vllm_gpu_memory_utilization: float | str  # "auto": the memory plan's share
    report_to: str  # none | tensorboard | wandb: a logging sink, not a training knob (not in the fingerprint)
    lora: Lora
    chat_template_kwargs: dict | None = None  # a property of the model, not a training knob
    dynamic_sampling: bool = False  # DAPO's online filtering (grpo_budget.train.dynamic)
    dynamic_max_rounds: int = 4
    rewards: dict | None = None  # reward name -> weight (grpo_budget.generation.rewards); None: the schema's default
    epochs: float | None = None  # None: train max_steps steps (see grpo_budget.train.schedule)
    checkpoints: int | None = None
    dtype: str = "auto"  # the model's (models.NAME.dtype)
    device: str | None = None  # the config's (cuda requires a usable GPU); None: what the machine has (library use)
    vllm_max_model_length: int | None = None  # the memory plan's (prompt + completion), on cuda
    method: str = "grpo"  # grpo_budget.train.methods: the settings below belong to one method each
    codapo_weight_offset: float = 0.1
    codapo_resample_share: float = 0.25
    codapo_repeats: int = 4
    codapo_resample: str = "top"
    guidance_fraction: float = 0.5
    guidance_when: str = "failed"

    def method_settings(self) -> dict:
        """The settings of this run's method (``codapo_*`` or ``guidance_*``), by name."""
        prefix = PREFIXES.get(self.method)
        return {k: v for k, v in vars(self).items() if prefix and k.startswith(prefix)}

    @classmethod
    def from_dict(cls, values: dict | None) -> "Training":
        values = values or {}
        full = schema.fill(("training",), {k: v for k, v in values.items() if k not in JOB_EXTRAS})
        return cls(**{**full, "lora": Lora(**full["lora"])}, **{k: values[k] for k in JOB_EXTRAS if k in values})


@dataclass(frozen=True)
class Generation:
    """A scoring or evaluation job's sampling and engine settings (see ``plan.generation_settings``)."""

    num_samples: int
    temperature: float
    top_p: float
    top_k: int | None  # None: the model's generation_config decides
    max_new_tokens: int
    batch_size: int
    seed: int
    backend: str
    backend_kwargs: dict
    max_lora_rank: int
    chat_template_kwargs: dict | None = None
    dtype: str = "auto"  # the model's (models.NAME.dtype)
    device: str | None = None  # the config's (cuda requires a usable GPU); None: what the machine has (library use)

    @classmethod
    def from_dict(cls, values: dict, section: str = "scoring") -> "Generation":
        """``values``: a job's settings; what is missing comes from the schema's ``section`` and top level."""
        values = dict(values)
        top = {k: values.pop(k) for k in ("backend", "backend_kwargs") if k in values}
        extra = {k: values.pop(k) for k in ("max_lora_rank", *JOB_EXTRAS) if k in values}
        section_values = schema.fill((section,), values)
        top = schema.fill_top(top, ("backend", "backend_kwargs"))
        if "max_lora_rank" not in extra:
            extra["max_lora_rank"] = schema.fill(("training",), {})["lora"]["r"]
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in section_values.items() if k in names}, **top,
                   **{k: v for k, v in extra.items() if k in names})


@dataclass(frozen=True)
class Cost:
    """The config's ``cost`` section: calibration folders and the runtime request's margin, floor and ceiling."""

    calibrate_from: list[str]
    margin: float
    runtime_floor: int
    runtime_ceiling: int

    @classmethod
    def from_dict(cls, values: dict | None) -> "Cost":
        return _build(cls, ("cost",), values)


@dataclass(frozen=True)
class Gpu:
    """The config's ``gpu`` section: the card the memory plan sizes GPU jobs for."""

    memory_gib: float
    max_prompt_tokens: int

    @classmethod
    def from_dict(cls, values: dict | None) -> "Gpu":
        return _build(cls, ("gpu",), values)


@dataclass(frozen=True)
class Analysis:
    """The config's ``analysis`` section."""

    n_boot: int
    level: float
    seed: int
    learnable_window: float | int
    stratify_by: str | dict
    drift: bool  # the drift jobs run and the drift table is built (the aggregate jobs are not given it)

    @classmethod
    def from_dict(cls, values: dict | None) -> "Analysis":
        return _build(cls, ("analysis",), values)


@dataclass(frozen=True)
class Bootstrap:
    """A model's ``bootstrap`` entry: build and train the embedded tiny model."""

    dataset: str
    target_pass_rate: float
    seed: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    train_items: int
    batch_size: int
    learning_rate: float
    max_steps: int
    calib_every: int
    sparse_calib_every: int
    dense_below_loss: float
    calib_items: int
    calib_samples: int
    stop_above: float

    @classmethod
    def from_dict(cls, values: dict) -> "Bootstrap":
        return _build(cls, schema.BOOTSTRAP, values)


@dataclass(frozen=True)
class Adaptive:
    """The config's ``scoring.adaptive`` section (see :mod:`grpo_budget.score.adaptive`)."""

    first: int  # samples per item in the first round
    step: int  # samples per item still in doubt in each later round
    max_samples: int  # per item
    confidence: float  # posterior mass on one side of every cut that settles an item
    mean_samples: float | None  # total samples over the pool, per item (None: no total cap)
    tolerance: float  # pass-rate distance from a cut within which either side is as good

    @classmethod
    def from_dict(cls, values: dict | None) -> "Adaptive":
        return _build(cls, ("scoring", "adaptive"), values)


# Settings class -> its schema section, for the test that they agree.
SECTIONS = {Training: ("training",), Lora: ("training", "lora"), Analysis: ("analysis",), Cost: ("cost",), Gpu: ("gpu",),
            Adaptive: ("scoring", "adaptive"),
            Bootstrap: schema.BOOTSTRAP}

"""Typed settings of each stage, filled from the config schema (:mod:`grpo_budget.config.schema`), the one source of
defaults: a settings object is built from a config section whose missing fields the schema fills in, and restates
none of them (a field the schema leaves without a default is ``None`` when absent). ``tests/test_registries.py``
checks that every class has exactly its schema section's fields.

A training section's settings that belong to one method (``codapo_*``, ``guidance_*``) travel by name in
``Training.method_settings``: which method owns which, and what they mean, is the method's
(:data:`grpo_budget.train.methods.METHODS`)."""

from __future__ import annotations

from dataclasses import dataclass, fields

from grpo_budget.config import schema

# What a job's settings carry besides its config section: the model's properties and the config's device, and the
# memory plan's vLLM context length (training on cuda). Absent, they are the model's schema defaults or unknown.
JOB_EXTRAS = ("chat_template_kwargs", "dtype", "device", "vllm_max_model_length")


def _names(cls) -> list[str]:
    return [f.name for f in fields(cls)]


def _extras(values: dict, names) -> dict:
    """The job extras among ``names`` from ``values``, absent ones as the model's schema default (dtype) or None."""
    model = schema.defaults(schema.MODEL)
    return {k: values[k] if k in values else model.get(k) for k in JOB_EXTRAS if k in names}


def _build(cls, pointer: tuple[str, ...], values: dict | None):
    full = schema.fill(pointer, values or {})
    return cls(**{k: full.get(k) for k in _names(cls)})


@dataclass(frozen=True)
class Lora:
    r: int
    alpha: int
    dropout: float
    target_modules: str | list[str]
    layers: list[int] | None  # [start, end] of the decoder layers to adapt; None: all

    @classmethod
    def from_dict(cls, values: dict | None) -> "Lora":
        return _build(cls, ("training", "lora"), values)


@dataclass(frozen=True)
class Training:
    """The config's ``training`` section, and the job's extras (:data:`JOB_EXTRAS`)."""

    num_generations: int  # the group size G: completions per prompt (TRL's and the config's name)
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
    epochs: float | None  # None: train max_steps steps (see grpo_budget.train.schedule)
    checkpoints: int | None
    max_completion_length: int
    beta: float
    temperature: float
    top_p: float
    top_k: int | None  # 0: no cut; None: the model's generation_config decides, as in scoring
    loss_type: str
    scale_rewards: str
    dynamic_sampling: bool  # DAPO's online filtering (grpo_budget.train.trainer)
    dynamic_max_rounds: int
    dynamic_at_cap: str  # grpo_budget.train.capping.AT_CAP
    dynamic_metric: str  # grpo_budget.train.capping.METRICS
    rewards: dict  # reward name -> weight (grpo_budget.generation.rewards)
    bf16: bool
    method: str  # grpo_budget.train.methods.METHODS
    gradient_checkpointing: bool | str  # "auto": the memory plan decides (grpo_budget.cluster.memory)
    use_vllm: bool
    vllm_mode: str
    vllm_gpu_memory_utilization: float | str  # "auto": the memory plan's share
    vllm_importance_sampling_correction: bool  # TRL's, with use_vllm on cuda only (grpo_budget.train.objective)
    vllm_importance_sampling_mode: str
    vllm_importance_sampling_clip_max: float | None
    vllm_importance_sampling_clip_min: float | None
    report_to: str  # a logging sink, not a training knob (not in the fingerprint)
    lora: Lora
    method_settings: dict  # every method's own settings by name, as the schema fills them (see the module doc)
    chat_template_kwargs: dict | None  # a property of the model, not a training knob
    dtype: str  # the model's (models.NAME.dtype)
    device: str | None  # the config's (cuda requires a usable GPU); None: what the machine has (library use)
    vllm_max_model_length: int | None  # the memory plan's (prompt + completion), on cuda

    @classmethod
    def from_dict(cls, values: dict | None) -> "Training":
        """A training job's settings (or a training section): what is missing comes from the schema."""
        values = values or {}
        names = _names(cls)
        full = schema.fill(("training",), {k: v for k, v in values.items() if k not in JOB_EXTRAS})
        own = [n for n in names if n not in ("lora", "method_settings", *JOB_EXTRAS)]
        return cls(**{k: full.get(k) for k in own}, lora=Lora.from_dict(full["lora"]),
                   method_settings={k: v for k, v in full.items() if k not in names},
                   **_extras(values, names))

    @property
    def per_device_batch(self) -> int:
        """Completions in one micro-batch on one process: a step's prompts x G over the accumulation steps (TRL's
        ``per_device_train_batch_size``; the memory plan sizes activations by it)."""
        return int(self.prompts_per_step) * int(self.num_generations) // int(self.gradient_accumulation_steps)


@dataclass(frozen=True)
class Generation:
    """A scoring or evaluation job's sampling and engine settings (see ``grpo_budget.cluster.jobs``)."""

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
    chat_template_kwargs: dict | None
    dtype: str  # the model's (models.NAME.dtype)
    device: str | None  # the config's (cuda requires a usable GPU); None: what the machine has (library use)

    @classmethod
    def from_dict(cls, values: dict, section: str = "scoring") -> "Generation":
        """``values``: a job's settings; what is missing comes from the schema's ``section`` and top level."""
        values = dict(values)
        names = _names(cls)
        top = {k: values.pop(k) for k in ("backend", "backend_kwargs") if k in values}
        extra = {k: values.pop(k) for k in ("max_lora_rank", *JOB_EXTRAS) if k in values}
        section_values = schema.fill((section,), values)
        top = schema.fill_top(top, ("backend", "backend_kwargs"))
        rank = extra.get("max_lora_rank", schema.fill(("training",), {})["lora"]["r"])
        return cls(**{k: v for k, v in section_values.items() if k in names}, **top, max_lora_rank=rank,
                   **_extras(extra, names))


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
SECTIONS = {Training: ("training",), Lora: ("training", "lora"), Analysis: ("analysis",), Cost: ("cost",),
            Gpu: ("gpu",), Adaptive: ("scoring", "adaptive"), Bootstrap: schema.BOOTSTRAP}

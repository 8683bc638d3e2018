"""What one ``generate`` call asks for (``Sampling``) and gives back per sample (``Completion``), shared by both
backends and everything that samples."""

from __future__ import annotations

from dataclasses import dataclass

from grpo_budget.config.settings import Generation


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

"""Sampling in which each generated row draws from its own random stream, keyed by (seed, item key, sample index).

``model.generate(do_sample=True)`` draws every row of a batch from one torch generator, so an item's samples
depend on which other items share its batch and where it stands (a job scoring 200 items and one scoring 201 give
item 7 other samples). vLLM seeds each request instead. Here the transformers backend does the same: greedy
decoding over scores that this logits processor has already sampled: one uniform per row and step, from a
counter-based hash of (row seed, step), through the inverse of the row's cumulative distribution. No generator state,
the same numbers on CPU and GPU, and a row's draws depend only on its own key and the logits it sees.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from grpo_budget.generation.vllm_args import request_seed

if TYPE_CHECKING:
    import torch

_MASK53 = (1 << 53) - 1


def _signed(x: int) -> int:
    return x - (1 << 64) if x >= 1 << 63 else x


# splitmix64's constants (Steele, Lea and Flood 2014), as torch's signed int64
_GOLDEN, _MIX1, _MIX2 = map(_signed, (0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB))


def _srl(x: "torch.Tensor", n: int) -> "torch.Tensor":
    """Logical right shift of int64 (torch's ``>>`` sign-extends)."""
    return (x >> n) & ((1 << (64 - n)) - 1)


def uniforms(seeds: "torch.Tensor", step: int, width: int) -> "torch.Tensor":
    """``[rows, width]`` floats in (0, 1): splitmix64 of (row seed, step, column), wrapping int64 arithmetic."""
    import torch

    cols = torch.arange(width, device=seeds.device, dtype=torch.int64)
    z = seeds[:, None] * _GOLDEN + (step * width + cols)[None, :] * _MIX2 + _GOLDEN
    z = (z ^ _srl(z, 30)) * _MIX1
    z = (z ^ _srl(z, 27)) * _MIX2
    z = z ^ _srl(z, 31)
    return ((_srl(z, 11) & _MASK53).to(torch.float64) + 0.5) / float(1 << 53)


def row_seeds(seed: int, keys: Sequence[str], n: int) -> list[int]:
    """The seed of every generated row: sample ``j`` of the prompt with key ``k`` gets (seed, k, j)'s."""
    return [request_seed(seed, f"{k}\x1f{j}") for k in keys for j in range(n)]


class KeyedSampler:
    """A transformers logits processor that samples each row from its own stream (see the module docstring).

    ``prompt_width``: the padded prompt length of the batch (the step counts generated tokens only, so padding
    never shifts a row's stream); ``temperature``/``top_k``/``top_p`` warp the scores as sampling would
    (temperature, then top-k, then top-p: transformers' order); other processors run before this one."""

    def __init__(self, seeds: Sequence[int], prompt_width: int, temperature: float, top_k: int | None,
                 top_p: float, device: "torch.device | str"):
        import torch
        from transformers import LogitsProcessorList, TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

        self.seeds = torch.tensor([_signed(s) for s in seeds], dtype=torch.int64, device=device)
        self.prompt_width = prompt_width
        warpers = [TemperatureLogitsWarper(temperature)] if temperature != 1.0 else []
        warpers += [TopKLogitsWarper(top_k)] if top_k else []
        warpers += [TopPLogitsWarper(top_p)] if top_p < 1.0 else []
        self.warpers = LogitsProcessorList(warpers)

    def __call__(self, input_ids: "torch.Tensor", scores: "torch.Tensor") -> "torch.Tensor":
        import torch

        scores = self.warpers(input_ids, scores.float())
        cdf = torch.softmax(scores, dim=-1).double().cumsum(dim=-1)
        total = cdf[:, -1:]
        u = torch.minimum(uniforms(self.seeds, input_ids.shape[1] - self.prompt_width, 1) * total,
                          torch.nextafter(total, torch.zeros_like(total)))
        # the first token whose cdf exceeds u: one of zero probability (cdf equal to its predecessor's) never is
        choice = torch.searchsorted(cdf, u, right=True)
        out = torch.full_like(scores, float("-inf"))
        return out.scatter_(1, choice, 0.0)

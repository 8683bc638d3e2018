"""The cost plan's CPU defaults (``CPU_DEFAULTS`` in workflow/grpo_budget/hardware.py), measured on this
machine: seconds per decoding step of transformers' batched ``generate`` and trained tokens per second, for the
embedded default's tiny Llama and for a randomly initialised Llama of SmolLM2-135M's shape (timing needs no real
weights).

A step of b sequences costs a fixed overhead (the tiny model at batch 1) + reading the float32 weights + 2 FLOPs per
parameter per sequence + a cost per sequence that does not grow with the parameters, which on a CPU add up rather
than overlap: a line fitted to 135M's steps at b = 1..64 gives the bytes per second (its intercept) and the FLOP/s
(its slope); the tiny model at batch 512 gives the cost per sequence, checked at batch 64. Training: a forward and
backward of 8 x 64 tokens through 135M (6 FLOPs per parameter per token). Each timing is the fastest of three:
another process on the cores only ever slows one down.

    .venv/bin/python perf/cpu_rates.py          # ~1 min on 2 idle cores (minutes under load)
"""

from __future__ import annotations

import os
import time

import numpy as np
import torch
from transformers import LlamaConfig, LlamaForCausalLM

TOKENS = 16
SMOLLM2 = dict(hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
               num_key_value_heads=3, vocab_size=49152, tie_word_embeddings=True)
TINY = dict(hidden_size=128, intermediate_size=512, num_hidden_layers=4, num_attention_heads=4, vocab_size=24)


def model(shape: dict) -> tuple[LlamaForCausalLM, float]:
    torch.manual_seed(0)
    lm = LlamaForCausalLM(LlamaConfig(max_position_embeddings=512, **shape)).eval()
    return lm, sum(p.numel() for p in lm.parameters())


def step_s(lm: LlamaForCausalLM, batch: int, repeats: int = 3) -> float:
    """Seconds per decoding step: TOKENS steps less the one-step prefill, each the fastest of ``repeats`` runs
    (another process on the cores only ever slows one down)."""
    ids = torch.randint(3, lm.config.vocab_size, (batch, 24))

    def run(n: int) -> float:
        t = time.perf_counter()
        lm.generate(ids, max_new_tokens=n, min_new_tokens=n, do_sample=False, pad_token_id=0)
        return time.perf_counter() - t

    with torch.no_grad():
        run(1)  # warm-up
        return (min(run(TOKENS) for _ in range(repeats)) - min(run(1) for _ in range(repeats))) / (TOKENS - 1)


def main() -> None:
    torch.set_num_threads(os.cpu_count() or 1)
    print(f"threads {torch.get_num_threads()}, load average {os.getloadavg()[0]:.1f}")
    tiny, tiny_params = model(TINY)
    overhead = step_s(tiny, 1)
    small, params = model(SMOLLM2)
    batches = [1, 8, 32, 64]
    steps = [step_s(small, b) for b in batches]
    slope, intercept = np.polyfit(batches, steps, 1)
    bandwidth, flops = 4 * params / (intercept - overhead), 2 * params / slope
    print(f"overhead per step (tiny, batch 1): {overhead * 1e3:.2f} ms")
    print(f"135M: {', '.join(f'batch {b} {t * 1e3:.1f}' for b, t in zip(batches, steps))} ms/step = "
          f"{intercept * 1e3:.1f} + {slope * 1e3:.2f} b ms -> weights read at {bandwidth / 1e9:.2f} GB/s, "
          f"{flops / 1e9:.0f} GFLOP/s")
    # The tiny model's steps at large batches cost more than its parameters say (sampling, attention over the
    # cache, elementwise ops): a cost per sequence, fixed at batch 512 and checked at 64.
    roofline = {b: overhead + 4 * tiny_params / bandwidth + 2 * tiny_params * b / flops for b in (64, 512)}
    per_seq = (step_s(tiny, 512) - roofline[512]) / 512
    print(f"tiny, batch 512: {per_seq * 1e6:.1f} us per sequence beyond the parameters' cost")
    print(f"tiny, batch 64: {step_s(tiny, 64) * 1e3:.2f} ms/step measured, {(roofline[64] + 64 * per_seq) * 1e3:.2f} "
          "given by the above")
    x = torch.randint(3, SMOLLM2["vocab_size"], (8, 64))
    small.train()
    took = []
    for _ in range(3):  # the first also warms up
        t = time.perf_counter()
        small(input_ids=x, labels=x).loss.backward()
        took.append(time.perf_counter() - t)
    print(f"135M, forward + backward of {x.numel()} tokens: {min(took):.2f} s -> "
          f"{6 * params * x.numel() / min(took) / 1e9:.0f} GFLOP/s at 6 FLOPs/parameter/token")


if __name__ == "__main__":
    main()

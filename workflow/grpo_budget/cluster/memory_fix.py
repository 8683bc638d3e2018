"""For a training job that does not fit its card: the smallest change of settings that does, found by planning the
job again under each candidate (:func:`smallest_fit`), so a refusal names the value that fits rather than one step
towards it. Candidates, fewest and mildest first: gradient checkpointing on; then each larger
``gradient_accumulation_steps`` that divides ``prompts_per_step`` (a micro-batch of fewer completions, the same
step), without and then with checkpointing. Neither changes what a step computes; when none fits, it says what
would (shorter sequences, a smaller G or a larger card)."""

from __future__ import annotations

from dataclasses import replace

from grpo_budget.cluster.memory import GIB, plan_train
from grpo_budget.cluster.shapes import Shape
from grpo_budget.train.methods import method_of


def _candidates(t) -> list[dict]:
    steps = [k for k in range(t.gradient_accumulation_steps + 1, t.prompts_per_step + 1) if t.prompts_per_step % k == 0]
    on = [] if t.gradient_checkpointing in (True, "auto") else [{"gradient_checkpointing": True}]
    out = on + [{"gradient_accumulation_steps": k} for k in steps]
    if on:
        out += [{"gradient_accumulation_steps": k, "gradient_checkpointing": True} for k in steps]
    return out


def smallest_fit(name: str, shape: Shape, t, gpu, dtype: str, on_vllm: bool, device: str) -> str:
    """One sentence: the smallest change of ``t`` (a :class:`~grpo_budget.config.settings.Training`) whose job
    fits ``gpu``, with its total; or, when none does, the closest and what else would."""
    best = None
    for change in _candidates(t):
        changed = replace(t, **change)
        b = plan_train(name, shape, changed, gpu, dtype, on_vllm, device, method_of(changed).micro_batch(changed))
        if b.fits:
            what = " and ".join(f"training.{k}: {str(v).lower() if isinstance(v, bool) else v}" for k, v in
                                change.items())
            return f"the smallest change that fits: {what} ({b.total / GIB:.1f} of {b.card / GIB:.0f} GiB)"
        best = b
    if best is None:
        best = plan_train(name, shape, t, gpu, dtype, on_vllm, device, method_of(t).micro_batch(t))
    return (f"no micro-batch or checkpointing setting fits: even one prompt's {t.num_generations} completions per "
            f"micro-batch with checkpointing need {best.total / GIB:.1f} GiB; lower training.max_completion_length, "
            "gpu.max_prompt_tokens or training.num_generations, or use a larger card (gpu.memory_gib)")

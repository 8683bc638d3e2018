"""The trainer's side of ``training.method`` (see :mod:`grpo_budget.train.methods` for the methods and their math):
guided rollouts swapped into a generation batch, and CoDaPO's weights and extra rollouts. Each function takes the
trainer of :func:`grpo_budget.train.dynamic.trainer_class` and a batch as TRL's ``_generate_and_score_completions``
returns it, and ``generate``, which generates and scores a list of dataset rows the same way."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from grpo_budget.generation import prompts as prompt_text
from grpo_budget.train import methods
from grpo_budget.train.batches import completion_logps, left_padded, mean_logps, recount, take_rows

Generate = Callable[[list[dict]], dict]


def pad_id(trainer) -> int:
    return getattr(trainer, "_tokenizer", trainer.processing_class).pad_token_id


def guided_prompt(prompt, prefix: str, tokenizer, template_kwargs: dict | None) -> str:
    """The prompt a guided rollout is generated from: the prompt as the model sees it (chat template applied, with
    the generation prompt), then the guidance, as if the model had begun its answer with it."""
    if not isinstance(prompt, str):
        prompt = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=False,
                                               **(template_kwargs or {}))
        return prompt + prefix
    return f"{prompt} {prefix}" if prefix else prompt


def with_old_logps(trainer, batch: dict) -> dict:
    """``batch`` with the sampling policy's per-token log-probs (``old_per_token_logps``), computed now if TRL did
    not: the guided rows carry theirs, so every row must."""
    if "old_per_token_logps" not in batch:
        batch["old_per_token_logps"] = completion_logps(trainer, batch)
    return batch


def guide(trainer, inputs: list[dict], out: dict, generate: Generate) -> dict:
    """Groups of ``out`` chosen by ``training.guidance_when`` generated again from their prompt plus guidance; in the
    batch their rows keep the unguided prompt, with the guided context's log-probs as ``old_per_token_logps``, so
    TRL's clipped ratio is pi_theta(o | q) / pi_old(o | q, g)."""
    g = trainer.num_generations
    groups = methods.guided_groups(out["correct"].view(-1, g).cpu().numpy(), trainer.guidance_when)
    out = with_old_logps(trainer, out)
    if not groups:
        return out
    tokenizer = trainer.processing_class
    kwargs = trainer.chat_template_kwargs
    guided = []
    for k in groups:
        row = inputs[k * g]
        prefix = methods.guidance(row["solution"], trainer.guidance_fraction)
        guided += [dict(row, prompt=guided_prompt(row["prompt"], prefix, tokenizer, kwargs))] * g
    gout = generate(guided)
    gout["old_per_token_logps"] = completion_logps(trainer, gout)  # pi_old(o | q, g)
    unguided = [prompt_text.tokenize(tokenizer, inputs[k * g]["prompt"], kwargs) for k in groups for _ in range(g)]
    gout["prompt_ids"], gout["prompt_mask"] = left_padded(unguided, pad_id(trainer), gout["prompt_ids"].device)
    if "ref_per_token_logps" in gout:  # the KL term is toward the reference on the unguided prompt
        gout["ref_per_token_logps"] = completion_logps(trainer, gout, reference=True)
    chosen = set(groups)
    keep = [i for i in range(len(out["advantages"])) if i // g not in chosen]
    batch = take_rows([out, gout], [(0, keep), (1, list(range(len(guided))))], pad_id(trainer))
    trainer.step_counts["guided_groups"] += len(groups)
    trainer.step_counts["guided_items"] += [int(inputs[k * g]["item"]) for k in groups]
    return recount(trainer, batch)


def group_values(trainer, batch: dict) -> np.ndarray:
    """CoDaPO's value of each group of ``batch`` (its rows in groups of ``num_generations``)."""
    g = trainer.num_generations
    logps = batch.get("old_per_token_logps")
    if logps is None:
        logps = completion_logps(trainer, batch)
    mean = mean_logps(logps, batch["completion_mask"]).view(-1, g).float().cpu().numpy()
    return methods.codapo_values(batch["correct"].view(-1, g).cpu().numpy(), mean, trainer.codapo_weight_offset)


def codapo(trainer, batch: dict, generate: Generate) -> dict:
    """CoDaSampling then CoDaWeighting on a step's batch: the highest-value questions (``training.codapo_resample``)
    get ``training.codapo_repeats`` more groups of rollouts, appended to the batch; every group's advantages are
    scaled by its own value."""
    import torch

    g = trainer.num_generations
    values = group_values(trainer, batch)
    picks = methods.resample(values, methods.resample_count(len(values), trainer.codapo_resample_share),
                             trainer.codapo_resample, trainer.refill_seed, trainer.state.global_step)
    items = batch["item"].view(-1, g)[:, 0]
    extra = generate([trainer.train_dataset[int(items[p])] for p in picks for _ in range(trainer.codapo_repeats * g)])
    extra_values = group_values(trainer, extra)
    for part, v in ((batch, values), (extra, extra_values)):
        scale = torch.tensor(np.repeat(v, g), dtype=part["advantages"].dtype, device=part["advantages"].device)
        part["advantages"] = part["advantages"] * scale
    if "old_per_token_logps" in batch and "old_per_token_logps" not in extra:
        extra = with_old_logps(trainer, extra)
    extra = {k: v for k, v in extra.items() if k in batch}
    merged = take_rows([batch, extra], [(0, list(range(len(batch["advantages"])))),
                                        (1, list(range(len(extra["advantages"]))))], pad_id(trainer))
    counts = trainer.step_counts
    counts["codapo_items"] += [int(items[p]) for p in picks]
    counts["codapo_value"] = float(np.mean(values))
    counts["codapo_extra_rollouts"] = len(extra["advantages"])
    return recount(trainer, merged)

"""Off-context guided rollouts (OC-GRPO; Guide-GRPO, Nath et al., arXiv 2506.13923) as a training method: a group
whose rollouts all failed is generated again from the prompt followed by a prefix of the item's reference solution;
the objective stays the unguided prompt, so each token's importance ratio is pi_theta(o_t | q, o_<t) /
pi_old(o_t | q, g, o_<t), clipped as TRL clips any ratio.

Where guidance goes and what it says as pure functions, then the trainer's hook (its registry entry is in
:mod:`grpo_budget.train.methods`). Each setting's source is in the schema's description and docs/methods.md."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from grpo_budget.config.settings import Training
from grpo_budget.generation import prompts as prompt_text
from grpo_budget.train.batches import (completion_logps, draw_tag, left_padded, pad_id, recount, take_rows,
                                       with_old_logps)

SETTINGS = ("guidance_fraction", "guidance_when")
GUIDE_WHEN = ("failed", "always")  # Guide-GRPO: only groups whose rollouts all failed; every group


def guided_groups(correct, when: str) -> list[int]:
    """The groups (rows of ``correct``: groups by rollouts) that are generated again with guidance."""
    correct = np.asarray(correct, dtype=float)
    if when == "always":
        return list(range(len(correct)))
    if when == "failed":
        return [int(i) for i in np.flatnonzero(correct.max(axis=1) <= 0)]
    raise ValueError(f"training.guidance_when is {when!r}; allowed: {', '.join(GUIDE_WHEN)}")


def guidance(solution: str, fraction: float) -> str:
    """The first ``fraction`` of a reference solution's words (rounded down), never more than all but its last two
    words, so that the final answer is left for the rollout to write."""
    words = str(solution).split()
    n = min(math.floor(fraction * len(words)), max(len(words) - 2, 0))
    return " ".join(words[:n])


def certain_generations(t: Training) -> int:
    """The rollouts a step surely generates beyond its batch: every group again with ``always``; with ``failed``
    as many as fail, which no plan knows ahead (0)."""
    return int(t.prompts_per_step) * int(t.num_generations) if t.method_settings["guidance_when"] == "always" else 0


def guided_prompt(prompt, prefix: str, tokenizer, template_kwargs: dict | None) -> str:
    """The prompt a guided rollout is generated from: the prompt as the model sees it (chat template applied, with
    the generation prompt), then the guidance, as if the model had begun its answer with it."""
    if not isinstance(prompt, str):
        prompt = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=False,
                                               **(template_kwargs or {}))
        return prompt + prefix
    return f"{prompt} {prefix}" if prefix else prompt


# --- the trainer's side: a hook on each round's rollouts (grpo_budget.train.trainer) ----------------------------------

Generate = Callable[[list[dict]], dict]


def guide(trainer, inputs: list[dict], out: dict, generate: Generate) -> dict:
    """Groups of ``out`` chosen by ``training.guidance_when`` generated again from their prompt plus guidance; in the
    batch their rows keep the unguided prompt, with the guided context's log-probs as ``old_per_token_logps``, so
    TRL's clipped ratio is pi_theta(o | q) / pi_old(o | q, g)."""
    num_generations, s = trainer.num_generations, trainer.method_settings
    groups = guided_groups(out["correct"].view(-1, num_generations).cpu().numpy(), s["guidance_when"])
    out = with_old_logps(trainer, out)
    if not groups:
        return out
    tokenizer = trainer.processing_class
    kwargs = trainer.chat_template_kwargs
    guided = []
    for k in groups:
        row = inputs[k * num_generations]
        prefix = guidance(row["solution"], s["guidance_fraction"])
        guided += [dict(row, prompt=guided_prompt(row["prompt"], prefix, tokenizer, kwargs))] * num_generations
    gout = generate(guided)
    gout["old_per_token_logps"] = completion_logps(trainer, gout)  # pi_old(o | q, g)
    unguided = [prompt_text.tokenize(tokenizer, inputs[k * num_generations]["prompt"], kwargs)
                for k in groups for _ in range(num_generations)]
    gout["prompt_ids"], gout["prompt_mask"] = left_padded(unguided, pad_id(trainer), gout["prompt_ids"].device)
    if "ref_per_token_logps" in gout:  # the KL term is toward the reference on the unguided prompt
        gout["ref_per_token_logps"] = completion_logps(trainer, gout, reference=True)
    chosen = set(groups)
    keep = [i for i in range(len(out["advantages"])) if i // num_generations not in chosen]
    batch = take_rows([out, gout], [(0, keep), (1, list(range(len(guided))))], pad_id(trainer))
    trainer.step_counts["guided_groups"] += len(groups)
    trainer.step_counts["guided_items"] += [int(inputs[k * num_generations]["item"]) for k in groups]
    return recount(trainer, batch)


def counts() -> dict:
    """A step's tally, before its hook runs."""
    return {"guided_groups": 0, "guided_items": []}


def metrics(c: dict) -> dict[str, float]:
    """What a guided step logs (train_log columns ``guided/*``)."""
    return {"guided/groups": c["guided_groups"], "guided/draw": draw_tag(c["guided_items"])}

"""Off-context guided rollouts (OC-GRPO; Guide-GRPO, Nath et al., arXiv 2506.13923) as a training method: a group
whose rollouts all failed is generated again with guidance, a prefix of the item's reference solution, as privileged
context in the prompt (``training.guidance_place``); the model writes its whole answer. A guided group that comes
back all failed or all solved is dropped (Guide's filter, ``training.guidance_filter``). The objective stays the
unguided prompt: each guided token's importance ratio is r = pi_theta(o_t | q, o_<t) / pi_old(o_t | q, g, o_<t),
corrected by ``training.guidance_objective`` (Guide's shaping r / (r + gamma) by default, unclipped:
:mod:`grpo_budget.train.offpolicy`); the other rows keep TRL's objective.

Where guidance goes and what it says as pure functions (and :mod:`grpo_budget.train.guidance`), then the trainer's
hooks: on each round's rollouts, and on each micro-batch's loss (its registry entry is in
:mod:`grpo_budget.train.methods`). Each setting's source is in the schema's description and docs/methods.md."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from grpo_budget.config.settings import Training
from grpo_budget.generation import prompts as prompt_text
from grpo_budget.train import guidance as placing
from grpo_budget.train import offpolicy
from grpo_budget.train.batches import (completion_logps, draw_tag, left_padded, pad_id, recount, take_rows,
                                       with_old_logps)

SETTINGS = ("guidance_fraction", "guidance_when", "guidance_place", "guidance_template", "guidance_objective",
            "guidance_gamma_quantile", "guidance_gamma_over", "guidance_delta", "guidance_filter")
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


def guided_prompt(prompt, prefix: str, tokenizer, template_kwargs: dict | None, place: str = "continuation",
                  template: str = "") -> str | list:
    """The prompt a guided rollout is generated from (``training.guidance_place``): the guidance in the prompt by
    ``template``, or beginning the answer (the prompt as the model sees it, then the guidance)."""
    return placing.guided_prompt(prompt, prefix, place, template, tokenizer, template_kwargs)


# --- the trainer's side: a hook on each round's rollouts (grpo_budget.train.trainer) ----------------------------------

Generate = Callable[[list[dict]], dict]


def guide(trainer, inputs: list[dict], out: dict, generate: Generate) -> dict:
    """Groups of ``out`` chosen by ``training.guidance_when`` generated again with guidance; in the batch their rows
    keep the unguided prompt, with the guided context's log-probs as ``old_per_token_logps`` (the ratio is
    pi_theta(o | q) / pi_old(o | q, g)) and ``guided`` set, which :func:`loss` reads. With ``guidance_filter`` a
    guided group that is all failed or all solved is dropped and its group stays as it was."""
    import torch

    num_generations, s = trainer.num_generations, trainer.method_settings
    groups = guided_groups(out["correct"].view(-1, num_generations).cpu().numpy(), s["guidance_when"])
    out = with_old_logps(trainer, out)
    out["guided"] = torch.zeros_like(out["advantages"])
    if not groups:
        return out
    tokenizer = trainer.processing_class
    kwargs = trainer.chat_template_kwargs
    guided = []
    for k in groups:
        row = inputs[k * num_generations]
        prefix = guidance(row["solution"], s["guidance_fraction"])
        prompt = guided_prompt(row["prompt"], prefix, tokenizer, kwargs, s["guidance_place"], s["guidance_template"])
        guided += [dict(row, prompt=prompt)] * num_generations
    gout = generate(guided)
    gout["old_per_token_logps"] = completion_logps(trainer, gout)  # pi_old(o | q, g)
    unguided = [prompt_text.tokenize(tokenizer, inputs[k * num_generations]["prompt"], kwargs)
                for k in groups for _ in range(num_generations)]
    gout["prompt_ids"], gout["prompt_mask"] = left_padded(unguided, pad_id(trainer), gout["prompt_ids"].device)
    if "ref_per_token_logps" in gout:  # the KL term is toward the reference on the unguided prompt
        gout["ref_per_token_logps"] = completion_logps(trainer, gout, reference=True)
    gout["guided"] = torch.ones_like(gout["advantages"])
    unmixed = placing.unmixed(gout["correct"].view(-1, num_generations).cpu().numpy())
    dropped = set(unmixed) if s["guidance_filter"] else set()
    kept = [i for i in range(len(groups)) if i not in dropped]  # guided groups kept, by their index in ``groups``
    replaced = {groups[i] for i in kept}  # the step's groups they replace
    keep = [r for r in range(len(out["advantages"])) if r // num_generations not in replaced]
    taken = [i * num_generations + j for i in kept for j in range(num_generations)]
    batch = take_rows([out, gout], [(0, keep), (1, taken)], pad_id(trainer))
    trainer.step_counts["guided_groups"] += len(groups)
    trainer.step_counts["guided_dropped"] += len(dropped)
    trainer.step_counts["guided_items"] += [int(inputs[k * num_generations]["item"]) for k in groups]
    return recount(trainer, batch)


def loss(trainer, model, inputs: dict, base) -> "torch.Tensor":
    """A micro-batch's loss: TRL's (``base``) for its rows, with its guided rows' policy term under
    ``guidance_objective`` in place of TRL's clip (``ppo``: TRL's own); every guided row's ratios and weights are
    tallied for the step's log (:func:`grpo_budget.train.offpolicy.step_summary`)."""
    import torch

    guided = inputs.get("guided")
    if guided is None or not bool(guided.any()):
        return base(model, inputs)
    s = trainer.method_settings
    form, advantages = s["guidance_objective"], inputs["advantages"]
    if form != "ppo":  # the guided rows' policy term is added below, under its own correction
        inputs = dict(inputs, advantages=torch.where(guided.bool(), torch.zeros_like(advantages), advantages))
    trainer.keep_logps = True
    try:
        total = base(model, inputs)
        logps = trainer.kept_logps
    finally:
        trainer.keep_logps, trainer.kept_logps = False, None
    mask = inputs["completion_mask"] * inputs.get("tool_mask", 1)
    old = inputs["old_per_token_logps"]
    factors = offpolicy.loss_weights(
        mask, trainer.loss_type, max_completion_length=trainer.max_completion_length,
        num_items_in_batch=inputs.get("num_items_in_batch"), accumulation=trainer.current_gradient_accumulation_steps,
        steps_per_generation=trainer.args.steps_per_generation, processes=trainer.accelerator.num_processes)
    kwargs = dict(epsilon_low=trainer.epsilon_low, epsilon_high=trainer.epsilon_high, delta=s["guidance_delta"],
                  quantile=s["guidance_gamma_quantile"], over=s["guidance_gamma_over"])
    rows = mask * guided.unsqueeze(1)
    if form != "ppo":
        per_token = offpolicy.guided_loss(logps, old, advantages, rows, form, **kwargs)
        total = total + (per_token * rows * factors).sum()
    ppo = dict(kwargs, delta=trainer.args.delta)  # the other rows: TRL's clip
    grad = torch.where(guided.bool().unsqueeze(1),
                       offpolicy.token_gradients(logps, old, advantages, rows, form, **kwargs),
                       offpolicy.token_gradients(logps, old, advantages, mask, "ppo", **ppo))
    ratio = torch.exp(logps.detach() - old)
    tallies = trainer.step_counts.setdefault("objective", [])
    tallies.append(offpolicy.token_tally(ratio, grad, factors, mask, guided, advantages))
    if trainer.accelerator.sync_gradients:  # the step's last micro-batch: its summary joins the step's log
        for name, value in offpolicy.step_summary(tallies).items():
            trainer._metrics["train"][name].append(value)
        tallies.clear()
    return total


def counts() -> dict:
    """A step's tally, before its hook runs."""
    return {"guided_groups": 0, "guided_dropped": 0, "guided_items": []}


def metrics(c: dict) -> dict[str, float]:
    """What a guided step logs (train_log columns ``guided/*``)."""
    return {"guided/groups": c["guided_groups"], "guided/dropped": c["guided_dropped"],
            "guided/draw": draw_tag(c["guided_items"])}

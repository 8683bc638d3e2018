"""The objective of guided rows (rollouts generated from a prompt with guidance, trained on the prompt without it):
the per-token loss of each form of importance correction, the weight each token then gets, the loss's normalisation
per TRL loss type, and what a step logs of them.

A guided token's ratio is r = pi_theta(o_t | q, o_<t) / pi_old(o_t | q, g, o_<t). The forms (``training.
guidance_objective``):

- ``shape``: Guide-GRPO's off-policy shaping (vaskar-open-source-research/guide_rl, ``core_algos.compute_policy_loss``
  with ``gamma_strategy: percentile``): the ratio is replaced by r / (r + gamma), gamma the detached ``quantile`` of
  the ratios (clamped at 1e-4 from below), and not clipped.
- ``delta``: TRL's two-sided clip (GRPOConfig ``delta``, INTELLECT-2): PPO's clip, and the ratio capped at delta.
- ``ppo``: PPO's clip, as TRL clips every ratio (``epsilon``, ``epsilon_high``).

A token's weight is d(loss_t) / d(log pi_theta(o_t)) over |A|: r where PPO's clip leaves it, 0 where the clip holds,
gamma r / (r + gamma)^2 under shaping. Everything here is a pure function of tensors; the trainer calls them.
"""

from __future__ import annotations

FORMS = ("shape", "delta", "ppo")
GAMMA_OVER = ("rollout", "micro_batch")  # the tokens one gamma is taken over
GAMMA_FLOOR = 1e-4  # Guide's clamp(min=1e-4)
LOSS_TYPES = ("grpo", "bnpo", "dr_grpo", "dapo")  # TRL loss types with a token-level clipped ratio (guided rows)


def gamma(ratio, mask, quantile: float, over: str):
    """Guide's gamma: the ``quantile`` (linear interpolation, as ``torch.quantile``) of the ratios of the tokens in
    ``mask``, per row (``rollout``) or over all rows (``micro_batch``), detached, at least 1e-4. Shape (B, 1), or a
    scalar; a row without tokens gets 1."""
    import torch

    r = ratio.detach().float()
    if over == "rollout":
        g = torch.nanquantile(torch.where(mask.bool(), r, torch.nan), quantile, dim=1, keepdim=True)
        return torch.nan_to_num(g, nan=1.0).clamp(min=GAMMA_FLOOR).to(ratio.dtype)
    if over == "micro_batch":
        picked = r[mask.bool()]
        g = torch.quantile(picked, quantile) if picked.numel() else torch.tensor(1.0)
        return g.clamp(min=GAMMA_FLOOR).to(ratio.dtype)
    raise ValueError(f"training.guidance_gamma_over is {over!r}; allowed: {', '.join(GAMMA_OVER)}")


def surrogate(ratio, advantages, form: str, *, epsilon_low: float, epsilon_high: float, delta: float | None,
              gamma_=None):
    """Per-token loss (minus the surrogate objective) of ratios ``ratio`` (B, T) and ``advantages`` (B, 1) or (B, T)
    under ``form``; ``gamma_`` is :func:`gamma`'s, for ``shape``."""
    import torch

    if form == "shape":
        return -advantages * ratio / (ratio + gamma_)
    clipped = torch.clamp(ratio, 1 - epsilon_low, 1 + epsilon_high)
    if form == "delta":
        ratio = torch.clamp(ratio, max=delta)
    elif form != "ppo":
        raise ValueError(f"training.guidance_objective is {form!r}; allowed: {', '.join(FORMS)}")
    return -torch.min(ratio * advantages, clipped * advantages)


def guided_loss(logps, old_logps, advantages, mask, form: str, *, epsilon_low: float, epsilon_high: float,
                delta: float | None, quantile: float, over: str):
    """Per-token loss (B, T) of guided rows, differentiable through ``logps`` (the policy's log-probs on the
    unguided prompt); ``old_logps`` are the guided context's. The ratio is exp(logps - old_logps)."""
    import torch

    if advantages.dim() == 1:
        advantages = advantages.unsqueeze(1)
    ratio = torch.exp(logps - old_logps)
    g = gamma(ratio, mask, quantile, over) if form == "shape" else None
    return surrogate(ratio, advantages, form, epsilon_low=epsilon_low, epsilon_high=epsilon_high, delta=delta,
                     gamma_=g)


def token_gradients(logps, old_logps, advantages, mask, form: str, **kwargs):
    """d(loss_t) / d(log pi_theta(o_t)) per token (B, T), detached, at ``logps``: what each token's loss pushes on
    its own log-prob (``kwargs`` as :func:`guided_loss`'s)."""
    import torch

    lp = logps.detach().clone().requires_grad_(True)
    with torch.enable_grad():
        loss = guided_loss(lp, old_logps.detach(), advantages.detach(), mask, form, **kwargs)
        (grad,) = torch.autograd.grad((loss * mask).sum(), lp)
    return grad.detach()


def loss_weights(mask, loss_type: str, *, max_completion_length: int, num_items_in_batch=None, accumulation: int = 1,
                 steps_per_generation: int = 1, processes: int = 1):
    """Per-token factors (B, T) with which TRL 1.16's ``_compute_loss`` sums a micro-batch's per-token losses in
    training: loss = sum(loss_t x factor_t)."""
    m = mask.float()
    rows = m.shape[0]
    if loss_type in ("grpo", "sapo"):
        return m / m.sum(-1, keepdim=True).clamp(min=1.0) / rows / accumulation
    if loss_type == "bnpo":
        return m / m.sum().clamp(min=1.0) / accumulation
    if loss_type == "dr_grpo":
        return m / (rows * max_completion_length) / accumulation
    if loss_type in ("dapo", "cispo", "vespo"):
        items = float(num_items_in_batch) if num_items_in_batch is not None else float(m.sum())
        return m / (max(items, 1.0) / processes * accumulation / steps_per_generation)
    if loss_type == "luspo":
        return m / rows / accumulation
    raise ValueError(f"unknown loss type {loss_type!r}")


def token_tally(ratio, grad, factors, mask, guided, advantages) -> dict:
    """One micro-batch's part of a step's objective log: the guided rows' token ratios and weights (tokens of
    nonzero advantage), and each side's summed gradient magnitude |grad| x factor. ``guided`` (B,) marks the guided
    rows; ``grad`` is :func:`token_gradients`' (the policy term only: no KL)."""
    import torch

    if advantages.dim() == 1:
        advantages = advantages.unsqueeze(1).expand_as(mask)
    tokens = mask.bool()
    g_rows = guided.bool().unsqueeze(1) & tokens
    push = (grad.abs() * factors).float()
    active = g_rows & (advantages != 0)
    weights = grad.abs() / advantages.abs().clamp(min=1e-30)
    return {
        "ratios": ratio.detach()[g_rows].float().cpu(),
        "weights": weights[active].float().cpu(),
        "guided_push": float(push[g_rows].sum()),
        "total_push": float(push[tokens].sum()),
    }


def step_summary(tallies: list[dict]) -> dict[str, float]:
    """A step's log of the guided rows' objective (train_log columns ``guided/*``): their token ratios' median, 10th
    and 90th percentiles; the median weight and the share of zero weight among their tokens of nonzero advantage;
    their share of the update's total gradient magnitude. Empty when the step had no guided row."""
    import torch

    ratios = torch.cat([t["ratios"] for t in tallies]) if tallies else torch.empty(0)
    if not ratios.numel():
        return {}
    weights = torch.cat([t["weights"] for t in tallies])
    total = sum(t["total_push"] for t in tallies)
    q = torch.quantile(ratios.double(), torch.tensor([0.5, 0.1, 0.9], dtype=torch.double)).tolist()
    out = {"guided/ratio_median": q[0], "guided/ratio_p10": q[1], "guided/ratio_p90": q[2],
           "guided/update_share": sum(t["guided_push"] for t in tallies) / total if total > 0 else 0.0}
    if weights.numel():
        out["guided/weight_median"] = float(torch.quantile(weights.double(), 0.5))
        out["guided/zero_weight_share"] = float((weights == 0).double().mean())
    return out

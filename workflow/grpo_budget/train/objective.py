"""The objective a run trained: the loss-relevant ``GRPOConfig`` values it used (recorded in its manifest), and what
TRL's vLLM importance-sampling correction did to its rollouts (logged per step).

With ``use_vllm``, TRL 1.16 weighs each completion by the ratio of the trainer's probability to vLLM's sampler's
(``vllm_importance_sampling_correction``): per token, or the product over the completion (``sequence_*`` modes), and
ratios outside [clip_min, clip_max] are clipped to the bound (``*_truncate``) or set to 0 (``*_mask``: the
completion, or the token, leaves the update). :func:`corrected_shares` counts what was clipped or zeroed.
"""

from __future__ import annotations

import math

IS_MODES = ("token_truncate", "token_mask", "sequence_truncate", "sequence_mask")

# GRPOConfig fields that change the loss a step minimises (TRL 1.16 ``_compute_loss``, ``_generate_and_score_...``).
LOSS_FIELDS = ("loss_type", "beta", "epsilon", "epsilon_high", "delta", "scale_rewards", "importance_sampling_level",
               "num_iterations", "mask_truncated_completions", "top_entropy_quantile", "off_policy_mask_threshold",
               "temperature", "use_vllm")
VLLM_FIELDS = ("vllm_importance_sampling_correction", "vllm_importance_sampling_mode",
               "vllm_importance_sampling_clip_min", "vllm_importance_sampling_clip_max")


def vllm_settings(t) -> dict:
    """The ``GRPOConfig`` fields of ``t``'s (a ``Training``) importance-sampling correction, by TRL's names."""
    return {f: getattr(t, f) for f in VLLM_FIELDS}


def used(args) -> dict:
    """The loss-relevant values of ``args`` (a ``GRPOConfig``) as the run used them; the importance-sampling
    correction's only where rollouts came from vLLM (it applies nowhere else)."""
    fields = LOSS_FIELDS + (VLLM_FIELDS if getattr(args, "use_vllm", False) else ())
    out = {f: getattr(args, f, None) for f in fields}
    if out["epsilon_high"] is None:  # TRL's trainer clips above at epsilon then (GRPOTrainer.__init__)
        out["epsilon_high"] = out["epsilon"]
    return out


def settings_problem(t) -> tuple[str, str] | None:
    """(the setting, why) where ``t``'s (a ``Training``) importance-sampling bounds are ones TRL refuses, else None."""
    lo, hi = t.vllm_importance_sampling_clip_min, t.vllm_importance_sampling_clip_max
    if lo is not None and hi is not None and lo >= hi:
        return ("vllm_importance_sampling_clip_min", f"{lo} is not below training.vllm_importance_sampling_clip_max "
                f"({hi}); allowed: a smaller bound, or null (no lower bound)")
    if lo is None and hi is None and t.vllm_importance_sampling_mode.endswith("truncate"):
        return ("vllm_importance_sampling_clip_max", f"null, with clip_min null too, leaves "
                f"{t.vllm_importance_sampling_mode} nothing to clip to; allowed: a bound, or a *_mask mode")
    return None


def corrected_shares(old_logps, sampling_logps, mask, mode: str, clip_min: float | None, clip_max: float | None):
    """(share zeroed, share clipped) of what TRL's correction weighs, completions in ``sequence_*`` modes, completion
    tokens in ``token_*`` modes: the ratio exp(old - sampling) (summed over the completion for a sequence) outside
    [clip_min, clip_max] is zeroed by ``*_mask`` and clipped by ``*_truncate`` (TRL 1.16's rule, NaN log-probs
    counting as a ratio of 1)."""
    import torch

    if mode not in IS_MODES:
        raise ValueError(f"training.vllm_importance_sampling_mode is {mode!r}; allowed: {', '.join(IS_MODES)}")
    diff = torch.nan_to_num((old_logps - sampling_logps) * mask, nan=0.0).double()
    if mode.startswith("sequence"):
        log_ratio, counted = diff.sum(-1), torch.ones(diff.shape[0], dtype=torch.bool, device=diff.device)
    else:
        log_ratio, counted = diff, mask.bool()
    lo = math.log(clip_min) if clip_min else -math.inf
    hi = math.log(clip_max) if clip_max is not None else math.inf
    outside = ((log_ratio < lo) | (log_ratio > hi)) & counted
    share = float(outside.sum()) / max(int(counted.sum()), 1)
    return (share, 0.0) if mode.endswith("mask") else (0.0, share)

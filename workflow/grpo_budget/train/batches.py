"""Generation batches as TRL's ``GRPOTrainer`` builds them: rows taken from several, re-padded and recounted,
log-probs of their completions, and a tag naming a step's draw (what dynamic sampling and the training methods
rebuild a step's batch with and log)."""

from __future__ import annotations

import hashlib

LEFT_PADDED = {"prompt_ids": "pad", "prompt_mask": 0}
RIGHT_PADDED = {"completion_ids": "pad", "completion_mask": 0, "old_per_token_logps": 0.0,
                "sampling_per_token_logps": 0.0, "ref_per_token_logps": 0.0, "importance_sampling_ratio": 0.0,
                "tool_mask": 1}
ROWS = {"advantages", "correct", "item", "guided"}  # one value per row; correct, item (grpo_budget.train.trainer)
# and guided (grpo_budget.train.guided) are ours
RECOUNTED = {"num_items_in_batch"}  # tokens of the loss, recomputed over the kept rows


def pad_id(trainer) -> int:
    return getattr(trainer, "_tokenizer", trainer.processing_class).pad_token_id


def _pad(t, width: int, value, left: bool):
    import torch

    if t.shape[1] == width:
        return t
    pad = torch.full((t.shape[0], width - t.shape[1]), value, dtype=t.dtype, device=t.device)
    return torch.cat([pad, t] if left else [t, pad], dim=1)


def take_rows(outputs: list[dict], rows: list[tuple[int, list[int]]], pad_id: int) -> dict:
    """One generation batch from rows of several: ``rows`` lists (output index, row indices); padded tensors are
    re-padded to the widest (prompts on the left, completions on the right). ``num_items_in_batch`` is left to the
    caller (it spans processes: :func:`recount`)."""
    import torch

    keys = set(outputs[0])
    unknown = keys - set(LEFT_PADDED) - set(RIGHT_PADDED) - ROWS - RECOUNTED
    if unknown:
        raise ValueError(f"dynamic sampling handles text-only batches; this one also has {sorted(unknown)}")
    out = {}
    for key in keys - RECOUNTED:
        parts = [outputs[i][key][idx] for i, idx in rows]
        if key in ROWS or parts[0].dim() == 1:
            out[key] = torch.cat(parts)
            continue
        left = key in LEFT_PADDED
        value = (LEFT_PADDED if left else RIGHT_PADDED)[key]
        value = pad_id if value == "pad" else value
        width = max(p.shape[1] for p in parts)
        out[key] = torch.cat([_pad(p, width, value, left) for p in parts])
    return out


def recount(trainer, batch: dict) -> dict:
    """``batch`` with ``num_items_in_batch`` (the loss's tokens over every process) counted over its rows."""
    loss_mask = batch["completion_mask"] * batch.get("tool_mask", 1)
    batch["num_items_in_batch"] = trainer.accelerator.gather(loss_mask.sum()).sum()
    return batch


def left_padded(ids: list[list[int]], pad_id: int, device):
    """Prompt token ids as TRL pads them: (ids, mask), on the left."""
    import torch

    width = max(len(i) for i in ids)
    out = torch.full((len(ids), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(ids), width), dtype=torch.long)
    for row, i in enumerate(ids):
        if i:
            out[row, width - len(i):] = torch.tensor(i, dtype=torch.long)
            mask[row, width - len(i):] = 1
    return out.to(device), mask.to(device)


def completion_logps(trainer, batch: dict, reference: bool = False):
    """Per-token log-probs of ``batch``'s completions after its prompts under the policy as it is now (no
    gradient), or under the reference model (``reference``: the base without the adapter, as TRL takes it)."""
    import torch
    from trl.trainer.grpo_trainer import use_adapter

    ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
    mask = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
    width = batch["completion_ids"].size(1)
    size = trainer.args.per_device_train_batch_size
    with torch.no_grad():
        if reference and trainer.ref_model is not None:
            return trainer._get_per_token_logps_and_entropies(trainer.ref_model, ids, mask, width, batch_size=size)[0]
        if reference:
            model = trainer.accelerator.unwrap_model(trainer.model)
            with use_adapter(model, adapter_name="ref" if "ref" in model.peft_config else None):
                return trainer._get_per_token_logps_and_entropies(trainer.model, ids, mask, width, batch_size=size)[0]
        return trainer._get_per_token_logps_and_entropies(trainer.model, ids, mask, width, batch_size=size)[0]


def mean_logps(logps, completion_mask):
    """Each row's mean per-token log-prob over its completion (0 for an empty completion)."""
    return (logps * completion_mask).sum(1) / completion_mask.sum(1).clamp(min=1)


def with_old_logps(trainer, batch: dict) -> dict:
    """``batch`` with the sampling policy's per-token log-probs (``old_per_token_logps``), computed now if TRL did
    not: rows a method generated otherwise carry theirs, so every row must."""
    if "old_per_token_logps" not in batch:
        batch["old_per_token_logps"] = completion_logps(trainer, batch)
    return batch


def draw_tag(items) -> float:
    """A number naming a set of items, logged per step so that two runs' draws can be compared exactly (exact in
    a float64: 40 bits)."""
    text = ",".join(str(int(i)) for i in sorted(items))
    return float(int(hashlib.sha256(text.encode()).hexdigest()[:10], 16))

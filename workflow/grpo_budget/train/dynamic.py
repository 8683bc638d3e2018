"""Online filtering: DAPO's dynamic sampling (Yu et al. 2025, sec. 3.2; verl ``filter_groups``) on TRL's
``GRPOTrainer``, which has none (TRL issues 3708, 3973).

A group whose rewards are all equal has zero advantage everywhere: it carries no gradient. With
``training.dynamic_sampling`` such groups are dropped from a step's generation batch and replaced by groups of
further prompts of the arm's subset (drawn with the run's seed and the step, so a resumed step draws the same ones),
in at most ``training.dynamic_max_rounds`` extra generation rounds; a batch still short after them is filled with
dropped groups, so every step has its configured size. Every run, filtered or not, logs per step the rollouts
generated, kept and discarded and the completion tokens generated (train_log columns ``rollouts/*``), which the cost
of an arm counts.
"""

from __future__ import annotations

import math

import numpy as np

LEFT_PADDED = {"prompt_ids": "pad", "prompt_mask": 0}
RIGHT_PADDED = {"completion_ids": "pad", "completion_mask": 0, "old_per_token_logps": 0.0,
                "sampling_per_token_logps": 0.0, "ref_per_token_logps": 0.0, "importance_sampling_ratio": 0.0,
                "tool_mask": 1}
ROWS = {"advantages"}
RECOUNTED = {"num_items_in_batch"}  # tokens of the loss, recomputed over the kept rows


def mixed_groups(advantages, group_size: int) -> list[bool]:
    """Per group of ``group_size`` consecutive rows: whether its rewards differ (some advantage is nonzero: the
    advantage is the reward minus its group's mean, exactly 0 for every row of an all-equal group)."""
    a = np.asarray(advantages, dtype=float).reshape(-1, group_size)
    return [bool(x) for x in (a != 0).any(axis=1)]


def round_prompts(shortfall: int, kept: int, tried: int, full: int) -> int:
    """Prompts to generate in the next round: enough to fill ``shortfall`` groups at the share of mixed groups seen
    so far (``kept`` of ``tried``), at least the shortfall, at most a full generation batch (``full`` prompts)."""
    if kept == 0:
        return full
    return max(shortfall, min(full, math.ceil(shortfall * tried / kept)))


def refill_prompts(n_items: int, used: set[int], n: int, seed: int, step: int, round_: int) -> list[int]:
    """``n`` subset items for a refill round: a seeded draw (run seed, step, round) without replacement from the
    items not yet in this step, topped up from all items when too few remain."""
    rng = np.random.default_rng([seed, step, round_])
    fresh = np.array(sorted(set(range(n_items)) - used), dtype=int)
    picks = list(rng.permutation(fresh)[:n])
    if len(picks) < n:
        picks += list(rng.choice(n_items, size=n - len(picks), replace=True))
    return [int(i) for i in picks]


def batch_groups(mixed: list[list[bool]], need: int) -> tuple[list[tuple[int, int]], int]:
    """The ``need`` groups a step trains on, as (round, group) pairs: the mixed groups in generation order, then
    dropped ones to fill a batch still short; and how many dropped groups filled it."""
    kept = [(r, g) for r, groups in enumerate(mixed) for g, m in enumerate(groups) if m]
    dropped = [(r, g) for r, groups in enumerate(mixed) for g, m in enumerate(groups) if not m]
    chosen = kept[:need]
    fill = dropped[: need - len(chosen)]
    return sorted(chosen + fill), len(fill)


def _pad(t, width: int, value, left: bool):
    import torch

    if t.shape[1] == width:
        return t
    pad = torch.full((t.shape[0], width - t.shape[1]), value, dtype=t.dtype, device=t.device)
    return torch.cat([pad, t] if left else [t, pad], dim=1)


def take_rows(outputs: list[dict], rows: list[tuple[int, list[int]]], pad_id: int) -> dict:
    """One generation batch from rows of several: ``rows`` lists (output index, row indices); padded tensors are
    re-padded to the widest (prompts on the left, completions on the right). ``num_items_in_batch`` is left to the
    caller (it spans processes)."""
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


def trainer_class():
    """``GRPOTrainer`` with dynamic sampling and rollout counts (built on first use: TRL is heavy to import)."""
    from trl import GRPOTrainer

    class Trainer(GRPOTrainer):
        """``dynamic``: whether to filter; ``max_rounds``: extra generation rounds per step; ``seed``: the run's."""

        def __init__(self, *args, dynamic: bool = False, max_rounds: int = 0, seed: int = 0, **kwargs):
            super().__init__(*args, **kwargs)
            self.dynamic, self.max_rounds, self.refill_seed = dynamic, max_rounds, seed
            if dynamic and self.accelerator.num_processes > 1:
                raise ValueError("training.dynamic_sampling runs on one process: TRL spreads a prompt's group "
                                 "over processes, so groups cannot be dropped locally")

        def _save(self, output_dir=None, state_dict=None):
            # Every reader (resume, evaluation, vLLM's adapters) takes the tokenizer from the base model's folder:
            # the Trainer's copy in each checkpoint was 3.5 MB (SmolLM2) to 11 MB (Qwen3) per checkpoint and arm.
            processing_class, self.processing_class = self.processing_class, None
            try:
                super()._save(output_dir, state_dict)
            finally:
                self.processing_class = processing_class

        def _generate_and_score_completions(self, inputs):
            first = super()._generate_and_score_completions(inputs)
            if not self.model.training:
                return first
            g = self.num_generations
            outputs, mixed = [first], [mixed_groups(first["advantages"].cpu(), g)]
            need = len(inputs) // g
            used = {int(x["item"]) for x in inputs if "item" in x}
            for round_ in range(1, self.max_rounds + 1 if self.dynamic else 1):
                kept = sum(map(sum, mixed))
                if kept >= need:
                    break
                tried = sum(map(len, mixed))
                n = round_prompts(need - kept, kept, tried, need)
                items = refill_prompts(len(self.train_dataset), used, n, self.refill_seed, self.state.global_step,
                                       round_)
                used |= set(items)
                batch = [self.train_dataset[i] for i in items for _ in range(g)]
                outputs.append(super()._generate_and_score_completions(batch))
                mixed.append(mixed_groups(outputs[-1]["advantages"].cpu(), g))
            generated = sum(map(len, mixed)) * g
            tokens = sum(int(o["completion_mask"].sum()) for o in outputs)
            if self.dynamic:
                groups, filled = batch_groups(mixed, need)
                by_round: dict[int, list[int]] = {}
                for r, k in groups:
                    by_round.setdefault(r, []).extend(range(k * g, (k + 1) * g))
                pad_id = getattr(self, "_tokenizer", self.processing_class).pad_token_id
                batch = take_rows(outputs, sorted(by_round.items()), pad_id)
                loss_mask = batch["completion_mask"] * batch.get("tool_mask", 1)
                batch["num_items_in_batch"] = self.accelerator.gather(loss_mask.sum()).sum()
                kept_groups = sum(mixed[r][k] for r, k in groups)
            else:
                batch, filled, kept_groups = first, 0, sum(mixed[0])
            metrics = self._metrics["train"]
            metrics["rollouts/generated"].append(generated)
            metrics["rollouts/kept"].append(need * g)
            metrics["rollouts/discarded"].append(generated - need * g)
            metrics["rollouts/generated_tokens"].append(tokens)
            metrics["rollouts/rounds"].append(len(outputs))
            metrics["rollouts/filled_groups"].append(filled)
            metrics["rollouts/kept_mixed_share"].append(kept_groups / need)
            return batch

    return Trainer

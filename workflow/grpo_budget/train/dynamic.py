"""Online filtering: DAPO's dynamic sampling (Yu et al. 2025, sec. 3.2; verl ``filter_groups``) on TRL's
``GRPOTrainer``, which has none (TRL issues 3708, 3973).

A group whose rewards are all equal has zero advantage everywhere: it carries no gradient. With
``training.dynamic_sampling`` such groups are dropped from a step's generation batch and replaced by groups of
further prompts of the arm's subset (drawn with the run's seed and the step, so a resumed step draws the same ones),
in at most ``training.dynamic_max_rounds`` extra generation rounds; a batch still short after them is filled with
dropped groups, so every step has its configured size. Every run, filtered or not, logs per step the rollouts
generated, kept and discarded and the completion tokens generated (train_log columns ``rollouts/*``), which the cost
of an arm counts.

The same subclass runs every ``training.method`` (:mod:`grpo_budget.train.methods`): a step's groups are generated
(``guided`` regenerates the failed ones with guidance), filtered when dynamic sampling is on, then ``codapo`` weighs
the batch and adds its resampled groups.
"""

from __future__ import annotations

import math

import numpy as np

from grpo_budget.train import method_hooks, methods
from grpo_budget.train.batches import take_rows
from grpo_budget.train.sampler import epoch_sampler


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


def trainer_class():
    """``GRPOTrainer`` with dynamic sampling, the training methods and rollout counts (built on first use: TRL is
    heavy to import)."""
    from trl import GRPOTrainer

    class Trainer(GRPOTrainer):
        """``dynamic``: whether to filter; ``max_rounds``: extra generation rounds per step; ``seed``: the run's;
        ``method``: ``training.method`` and its settings (``grpo_budget.train.methods``)."""

        def __init__(self, *args, dynamic: bool = False, max_rounds: int = 0, seed: int = 0, method: str = "grpo",
                     method_settings: dict | None = None, **kwargs):
            super().__init__(*args, **kwargs)
            self.dynamic, self.max_rounds, self.refill_seed, self.method = dynamic, max_rounds, seed, method
            for key, value in (method_settings or {}).items():
                setattr(self, key, value)
            self.step_counts: dict = {}
            if (dynamic or method != "grpo") and self.accelerator.num_processes > 1:
                raise ValueError("training.dynamic_sampling and training.method other than grpo run on one process: "
                                 "TRL spreads a prompt's group over processes, so groups cannot be changed locally")

        def _get_train_sampler(self, dataset=None):
            # TRL's sampler, but each pass's order told by its number: a resumed run takes the prompts it would have.
            base = super()._get_train_sampler(dataset)
            return epoch_sampler(data_source=base.data_source, mini_repeat_count=base.mini_repeat_count,
                                 batch_size=base.batch_size, repeat_count=base.repeat_count, shuffle=base.shuffle,
                                 seed=base.seed)

        def _save(self, output_dir=None, state_dict=None):
            # Every reader (resume, evaluation, vLLM's adapters) takes the tokenizer from the base model's folder:
            # the Trainer's copy in each checkpoint was 3.5 MB (SmolLM2) to 11 MB (Qwen3) per checkpoint and arm.
            processing_class, self.processing_class = self.processing_class, None
            try:
                super()._save(output_dir, state_dict)
            finally:
                self.processing_class = processing_class

        def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
            rewards = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
            self.last_rewards = rewards  # every process's rows; the methods run on one process
            return rewards

        def _scored(self, inputs):
            """TRL's generation and scoring of ``inputs``, with each row's correctness and item, counted."""
            import torch

            out = super()._generate_and_score_completions(inputs)
            names = list(self.reward_func_names)
            column = names.index("correct") if "correct" in names else 0
            out["correct"] = (self.last_rewards[:, column] >= 1).float().to(out["advantages"].device)
            out["item"] = torch.tensor([int(x.get("item", -1)) for x in inputs], device=out["advantages"].device)
            self.step_counts["rollouts"] += len(inputs)
            self.step_counts["tokens"] += int(out["completion_mask"].sum())
            return out

        def _rollouts(self, inputs):
            out = self._scored(inputs)
            if self.method == "guided":
                out = method_hooks.guide(self, inputs, out, self._scored)
            return out

        def _generate_and_score_completions(self, inputs):
            if not self.model.training:
                return super()._generate_and_score_completions(inputs)
            self.step_counts = {"rollouts": 0, "tokens": 0, "guided_groups": 0, "guided_items": [],
                                "codapo_items": []}
            first = self._rollouts(inputs)
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
                outputs.append(self._rollouts(batch))
                mixed.append(mixed_groups(outputs[-1]["advantages"].cpu(), g))
            pad_id = method_hooks.pad_id(self)
            if self.dynamic:
                groups, filled = batch_groups(mixed, need)
                by_round: dict[int, list[int]] = {}
                for r, k in groups:
                    by_round.setdefault(r, []).extend(range(k * g, (k + 1) * g))
                batch = method_hooks.recount(self, take_rows(outputs, sorted(by_round.items()), pad_id))
            else:
                batch, filled = first, 0
            if self.method == "codapo":
                batch = method_hooks.codapo(self, batch, self._rollouts)
            counts, metrics = self.step_counts, self._metrics["train"]
            kept_rows = len(batch["advantages"])
            metrics["rollouts/generated"].append(counts["rollouts"])
            metrics["rollouts/kept"].append(kept_rows)
            metrics["rollouts/discarded"].append(counts["rollouts"] - kept_rows)
            metrics["rollouts/generated_tokens"].append(counts["tokens"])
            metrics["rollouts/rounds"].append(len(outputs))
            metrics["rollouts/filled_groups"].append(filled)
            metrics["rollouts/kept_mixed_share"].append(float(np.mean(mixed_groups(batch["advantages"].cpu(), g))))
            if self.method == "guided":
                metrics["guided/groups"].append(counts["guided_groups"])
                metrics["guided/draw"].append(methods.draw_tag(counts["guided_items"]))
            if self.method == "codapo":
                metrics["codapo/value_mean"].append(counts["codapo_value"])
                metrics["codapo/extra_rollouts"].append(counts["codapo_extra_rollouts"])
                metrics["codapo/draw"].append(methods.draw_tag(counts["codapo_items"]))
            return {k: v for k, v in batch.items() if k not in ("correct", "item")}

    return Trainer

"""The trainer every run uses: TRL's ``GRPOTrainer`` with rollout counts per step, online filtering, and the
training methods' hooks (:data:`grpo_budget.train.methods.METHODS`).

Online filtering is DAPO's dynamic sampling (Yu et al. 2025, sec. 3.2; verl ``filter_groups``), which TRL has none of
(TRL issues 3708, 3973). A group whose rollouts all score alike carries no gradient (on the total reward) or no
signal of success (on accuracy, DAPO's filter): ``training.dynamic_metric``. With ``training.dynamic_sampling`` such
groups are dropped from a step's generation batch and replaced by groups of further prompts of the arm's subset
(drawn with the run's seed and the step, so a resumed step draws the same ones), in at most
``training.dynamic_max_rounds`` extra generation rounds; a batch still short after them does what
``training.dynamic_at_cap`` says (:mod:`grpo_budget.train.capping`: fill, error or carry). Every run, filtered or
not, logs per step the rollouts generated, kept and discarded and the completion tokens generated (train_log columns
``rollouts/*``), which the cost of an arm counts; with vLLM, the share of rollouts TRL's importance-sampling
correction zeroed or clipped (``sampling/importance_sampling_*_share``, :mod:`grpo_budget.train.objective`).

A step: the method's inputs hook may replace its prompts (``codapo``'s second update of a batch trains on the
previous step's selection), its groups are generated (the method's rollouts hook runs on each round, e.g. ``guided``
regenerates the failed groups with guidance), filtered when dynamic sampling is on, then the method's batch hook runs
on the whole batch (``codapo`` weighs it and selects its questions), and the step's counts are logged. A method that
makes several optimizer steps of one batch (``Method.updates_per_batch``) gets each batch from the sampler that many
steps in a row; what one step leaves for the next (``method_state``, JSON) is saved in each checkpoint
(:data:`METHOD_STATE_FILE`) and read back on resume.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from grpo_budget.config.settings import Training
from grpo_budget.errors import UserError
from grpo_budget.io import read_json, write_json
from grpo_budget.train import capping, objective
from grpo_budget.train.batches import pad_id, recount, take_rows, with_old_logps
from grpo_budget.train.methods import method_of
from grpo_budget.train.sampler import epoch_sampler

METHOD_STATE_FILE = "method_state.json"  # in a checkpoint, beside rng_state.pth: what a method carries to the next step


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


def trainer_class():
    """``GRPOTrainer`` with dynamic sampling, the training methods and rollout counts (built on first use: TRL is
    heavy to import)."""
    from trl import GRPOTrainer

    class Trainer(GRPOTrainer):
        """``training``: the run's settings, which it reads directly (dynamic sampling and its rounds, the method
        and the method's own settings); draws are seeded by the run's seed (``args.seed``)."""

        def __init__(self, *args, training: Training, **kwargs):
            super().__init__(*args, **kwargs)
            self.dynamic, self.max_rounds = training.dynamic_sampling, training.dynamic_max_rounds
            self.at_cap, self.metric = training.dynamic_at_cap, training.dynamic_metric
            self.carried: list[dict] = []  # carry: one-group batches an earlier step found beyond its need
            self.method = method_of(training)
            self.method_settings = self.method.own(training)
            self.refill_seed = int(self.args.seed)
            self.step_counts: dict = {}
            self.keep_logps, self.kept_logps = False, None  # a method's loss hook reads the loss's own log-probs
            self.method_state: dict = {}  # what the method's last step left for the next one (JSON)
            self.updates_per_batch = self.method.updates_per_batch(training)
            if (self.dynamic or self.method.changes_groups) and self.accelerator.num_processes > 1:
                raise ValueError("training.dynamic_sampling and training.method other than grpo run on one process: "
                                 "TRL spreads a prompt's group over processes, so groups cannot be changed locally")

        def _get_train_sampler(self, dataset=None):
            # TRL's sampler, but each pass's order told by its number: a resumed run takes the prompts it would have.
            # A method with several updates per batch gets each batch that many steps in a row (tmlr-group/CoDaPO's
            # DuplicateBatchDataLoader): the epoch's length, and the Trainer's steps per epoch, count them.
            base = super()._get_train_sampler(dataset)
            return epoch_sampler(data_source=base.data_source, mini_repeat_count=base.mini_repeat_count,
                                 batch_size=base.batch_size, repeat_count=base.repeat_count * self.updates_per_batch,
                                 shuffle=base.shuffle, seed=base.seed)

        def _save_rng_state(self, output_dir):
            super()._save_rng_state(output_dir)
            if self.method_state and self.args.should_save:  # written before trainer_state.json and sha256.json
                write_json(self.method_state, f"{output_dir}/{METHOD_STATE_FILE}")

        def _load_rng_state(self, checkpoint):
            super()._load_rng_state(checkpoint)
            if checkpoint is not None and (Path(checkpoint) / METHOD_STATE_FILE).exists():
                self.method_state = read_json(Path(checkpoint) / METHOD_STATE_FILE)

        def _save(self, output_dir=None, state_dict=None):
            # Every reader (resume, evaluation, vLLM's adapters) takes the tokenizer from the base model's folder:
            # the Trainer's copy in each checkpoint was 3.5 MB (SmolLM2) to 11 MB (Qwen3) per checkpoint and arm.
            processing_class, self.processing_class = self.processing_class, None
            try:
                super()._save(output_dir, state_dict)
            finally:
                self.processing_class = processing_class

        def _get_per_token_logps_and_entropies(self, *args, **kwargs):
            out = super()._get_per_token_logps_and_entropies(*args, **kwargs)
            if getattr(self, "keep_logps", False):  # the loss's forward pass: its log-probs, graph and all
                self.kept_logps = out[0]
            return out

        def _compute_loss(self, model, inputs):
            hook = self.method.on_loss
            if hook is None or not self.model.training:
                return super()._compute_loss(model, inputs)
            return hook(self, model, inputs, super()._compute_loss)

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
            """One round: ``inputs`` generated and scored, then the method's rollouts hook."""
            out = self._scored(inputs)
            hook = self.method.on_rollouts
            return hook(self, inputs, out, self._scored) if hook else out

        def _generate_and_score_completions(self, inputs):
            if not self.model.training:
                return super()._generate_and_score_completions(inputs)
            self.step_counts = {"rollouts": 0, "tokens": 0, **self.method.counts()}
            if self.method.on_inputs is not None:
                inputs = self.method.on_inputs(self, inputs)
            need = len(inputs) // self.num_generations
            outputs, mixed = generation_rounds(self, inputs, need)
            batch, taken = step_batch(self, outputs, mixed, need)
            if self.method.on_batch is not None:
                batch = self.method.on_batch(self, batch, self._rollouts)
            log_step(self, batch, len(outputs), taken)
            return {k: v for k, v in batch.items() if k not in ("correct", "item")}

    return Trainer


# --- a step of the trainer: its rounds, its batch, what it logs ------------------------------------------------------


def generation_rounds(trainer, inputs: list[dict], need: int) -> tuple[list[dict], list[list[bool]]]:
    """The step's generation rounds: ``inputs``, then with dynamic sampling refills of further prompts while fewer
    than ``need`` groups are mixed; each round's output and which of its groups are mixed."""
    num_generations = trainer.num_generations
    first = trainer._rollouts(inputs)
    outputs, mixed = [first], [passing(trainer, first)]
    used = {int(x["item"]) for x in inputs if "item" in x}
    for round_ in range(1, trainer.max_rounds + 1 if trainer.dynamic else 1):
        kept = sum(map(sum, mixed))
        if kept >= need:
            break
        tried = sum(map(len, mixed))
        n = round_prompts(need - kept, kept, tried, need)
        items = refill_prompts(len(trainer.train_dataset), used, n, trainer.refill_seed, trainer.state.global_step,
                               round_)
        used |= set(items)
        batch = [trainer.train_dataset[i] for i in items for _ in range(num_generations)]
        outputs.append(trainer._rollouts(batch))
        mixed.append(passing(trainer, outputs[-1]))
    return outputs, mixed


def passing(trainer, out: dict) -> list[bool]:
    """Which groups of a round's ``out`` pass the filter (``training.dynamic_metric``)."""
    return capping.mixed(out["correct"].cpu(), out["advantages"].cpu(), trainer.num_generations, trainer.metric)


def _rows(group: int, num_generations: int) -> list[int]:
    return list(range(group * num_generations, (group + 1) * num_generations))


def step_batch(trainer, outputs: list[dict], mixed: list[list[bool]], need: int) -> tuple[dict, dict]:
    """The step's batch (with dynamic sampling: ``need`` groups, the passing ones first, then at the cap what
    ``training.dynamic_at_cap`` says) and how many groups were filled and carried into it."""
    if not trainer.dynamic:
        return outputs[0], {"filled": 0, "carried": 0}
    G, pad = trainer.num_generations, pad_id(trainer)
    p = capping.plan(mixed, need, trainer.at_cap, len(trainer.carried))
    if p.short and trainer.at_cap == "error":
        raise UserError(
            f"dynamic sampling found {need - p.short} of the {need} groups step {trainer.state.global_step + 1} "
            f"needs whose rollouts differ in {trainer.metric} after {len(outputs) - 1} extra rounds "
            f"(training.dynamic_max_rounds: {trainer.max_rounds}); training.dynamic_at_cap is error, which stops "
            "the run as verl's DAPO recipe does: the subset is too hard or too easy for the model; allowed: fill, "
            "carry, or more rounds")
    by_round: dict[int, list[int]] = {}
    for r, k in sorted(p.own + p.filled):
        by_round.setdefault(r, []).extend(_rows(k, G))
    batch = take_rows(outputs, sorted(by_round.items()), pad)
    if trainer.at_cap == "carry":
        # The newest carried groups go in (nearest the policy now); the surplus waits, with its sampling policy's
        # log-probs taken now (before this step's update), for a later step's importance ratio.
        split = len(trainer.carried) - p.carried
        waiting, used = trainer.carried[:split], trainer.carried[split:]
        if used:
            batch = with_old_logps(trainer, batch)
            parts = [batch, *used]
            batch = take_rows(parts, [(i, list(range(len(x["advantages"])))) for i, x in enumerate(parts)], pad)
        surplus = [with_old_logps(trainer, take_rows(outputs, [(r, _rows(k, G))], pad)) for r, k in p.surplus]
        trainer.carried = capping.keep_carried(waiting, surplus, need)
    return recount(trainer, batch), {"filled": len(p.filled), "carried": p.carried}


def log_step(trainer, batch: dict, rounds: int, taken: dict) -> None:
    """The step's rollout counts (train_log columns ``rollouts/*``), what TRL's vLLM correction did to its batch,
    then what its method logs."""
    counts, metrics = trainer.step_counts, trainer._metrics["train"]
    kept_rows = len(batch["advantages"])
    carried_rows = taken["carried"] * trainer.num_generations  # generated in an earlier step
    metrics["rollouts/generated"].append(counts["rollouts"])
    metrics["rollouts/kept"].append(kept_rows)
    metrics["rollouts/discarded"].append(counts["rollouts"] - kept_rows + carried_rows)
    metrics["rollouts/generated_tokens"].append(counts["tokens"])
    metrics["rollouts/rounds"].append(rounds)
    metrics["rollouts/filled_groups"].append(taken["filled"])
    if trainer.dynamic and trainer.at_cap == "carry":
        metrics["rollouts/carried_groups"].append(taken["carried"])
    metrics["rollouts/kept_mixed_share"].append(  # groups with a gradient: some advantage is nonzero
        float(np.mean(capping.mixed(None, batch["advantages"].cpu(), trainer.num_generations, "reward"))))
    if trainer.use_vllm and trainer.vllm_importance_sampling_correction:
        masked, truncated = objective.corrected_shares(
            batch["old_per_token_logps"], batch["sampling_per_token_logps"], batch["completion_mask"],
            trainer.vllm_importance_sampling_mode, trainer.vllm_importance_sampling_clip_min,
            trainer.vllm_importance_sampling_clip_max)
        metrics["sampling/importance_sampling_masked_share"].append(masked)
        metrics["sampling/importance_sampling_truncated_share"].append(truncated)
    for name, value in trainer.method.metrics(counts).items():
        metrics[name].append(value)

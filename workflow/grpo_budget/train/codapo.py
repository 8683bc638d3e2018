"""CoDaPO (Zhou et al., ICML 2026, arXiv 2606.07950; code tmlr-group/CoDaPO) as a training method: each question's
group gets a bounded value ``v = c * (1 - 4 (d - 1/2)^2) + offset`` from its rollouts' confidence ``c`` (exp of the
mean per-token log-prob) and difficulty ``d`` (1 - the group's accuracy); the group's advantages are scaled by ``v``
(CoDaWeighting, the code's ``compute_codapo_advantage``), and the batch's highest-value questions are trained on
again (CoDaSampling).

``codapo_updates`` 2 (the default) is the reference code's loop (``codapo/ray_trainer.py``): an update on the batch,
then the selected questions generated again by the policy after that update, each ``repeats`` times in turn to a
batch of the same size (:mod:`grpo_budget.train.refocus`), and a second update on them. Each update is a step of the
run: the step after a batch's step trains on that batch's selection, carried between the two in the trainer's method
state (saved in each checkpoint, so a run killed between them resumes to the same result). ``codapo_updates`` 1 is
the project's earlier single update: the selected questions' ``repeats`` more groups generated in the same step and
trained with the batch.

The math as pure functions, then the trainer's hooks (its registry entry is in :mod:`grpo_budget.train.methods`).
Each setting's source is in the schema's description and docs/methods.md."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from grpo_budget.config.settings import Training
from grpo_budget.train.batches import completion_logps, draw_tag, mean_logps, pad_id, recount, take_rows, with_old_logps
from grpo_budget.train.refocus import RULES, percentile_picks, refocused

SETTINGS = ("codapo_weight_offset", "codapo_resample_share", "codapo_repeats", "codapo_resample", "codapo_updates")
RESAMPLE_RULES = RULES  # the reference code's percentile; the paper's top-K; a draw proportional to value
UPDATES = (2, 1)  # the reference's two updates per batch; the single update the project ran before


def codapo_values(correct, mean_logps, offset: float) -> np.ndarray:
    """Per group (rows: groups, columns: its rollouts): ``c * (1 - 4 (d - 0.5)^2) + offset`` with ``d`` = 1 - the
    share of correct rollouts and ``c`` = exp of the mean over the group of each rollout's mean token log-prob
    (tmlr-group/CoDaPO ``compute_codapo_advantage``). Bounded in [offset, 1 + offset]."""
    correct = np.asarray(correct, dtype=float)
    d = 1.0 - correct.mean(axis=1)
    c = np.exp(np.asarray(mean_logps, dtype=float).mean(axis=1))
    return c * (1.0 - 4.0 * (d - 0.5) ** 2) + float(offset)


def resample_count(n_groups: int, share: float) -> int:
    """The paper's K: ``share`` of the batch's questions, at least one (the code's ``percentile`` = 1 - share)."""
    return max(1, min(n_groups, round(share * n_groups)))


def resample_probabilities(values) -> np.ndarray:
    """The ``value`` rule's draw: each question with probability proportional to its value."""
    v = np.asarray(values, dtype=float)
    return v / v.sum()


def resample(values, k: int, rule: str, seed: int, step: int) -> list[int]:
    """The groups that get extra rollouts this step: ``k`` of them, the highest values (``top``; ties in a seeded
    order) or ``k`` independent draws proportional to value (``value``; a group drawn twice gets twice the extra
    rollouts), seeded by the run's seed and the step so a resumed step draws the same."""
    rng = np.random.default_rng([seed, step, 7])
    v = np.asarray(values, dtype=float)
    if rule == "top":
        order = np.lexsort((rng.permutation(len(v)), -v))
        return sorted(int(i) for i in order[:k])
    if rule == "value":
        return sorted(int(i) for i in rng.choice(len(v), size=k, replace=True, p=resample_probabilities(v)))
    raise ValueError(f"training.codapo_resample is {rule!r}; allowed: {', '.join(RESAMPLE_RULES)}")


def selected(values, share: float, rule: str, seed: int, step: int) -> list[int]:
    """The batch's selected questions (positions, in batch order): ``percentile``, every one at or above the 1 -
    ``share`` quantile of the values (the reference code); else ``resample``'s K = ``resample_count`` of them."""
    if rule == "percentile":
        return percentile_picks(values, 1.0 - float(share))
    return resample(values, resample_count(len(values), share), rule, seed, step)


def extra_rows(t: Training) -> int:
    """The rollouts a step's batch gains: with one update, its resampled questions x repeats x G (generated and
    trained); with two, none (the second update is a step of its own, of the batch's size)."""
    s = t.method_settings
    if int(s["codapo_updates"]) == 2:
        return 0
    return resample_count(int(t.prompts_per_step), s["codapo_resample_share"]) * int(s["codapo_repeats"]) * int(
        t.num_generations)


def updates(t: Training) -> int:
    """Optimizer steps per batch of the subset (``codapo_updates``)."""
    return int(t.method_settings["codapo_updates"])


def batch_problem(t: Training, micro_batches: int) -> tuple[str, str] | None:
    """The setting to change and why, where the grown batch cannot be split into ``micro_batches`` equal
    micro-batches; None where it can (TRL splits a generation batch evenly and drops a remainder)."""
    extra = extra_rows(t)
    if extra % micro_batches:
        s = t.method_settings
        questions = resample_count(int(t.prompts_per_step), s["codapo_resample_share"])
        return "codapo_repeats", (f"CoDaPO adds {extra} rollouts per step ({questions}"
                f" questions x training.codapo_repeats {s['codapo_repeats']} x {t.num_generations}), which gradient "
                f"accumulation's {micro_batches} micro-batches cannot split evenly: change training.codapo_repeats or "
                "training.gradient_accumulation_steps")
    return None


# --- the trainer's side: hooks on the step's prompts and on its batch (grpo_budget.train.trainer) -------------------

Generate = Callable[[list[dict]], dict]


def second_update(trainer) -> bool:
    """Whether this step is a batch's second update: with two updates per batch the sampler gives every batch two
    steps in a row from step 0, so the odd steps are the second ones."""
    return int(trainer.method_settings["codapo_updates"]) == 2 and trainer.state.global_step % 2 == 1


def refocus_inputs(trainer, inputs: list[dict]) -> list[dict]:
    """A step's prompts: the sampler's batch, or on a second update the previous step's selection, each question
    ``repeats`` times in turn to the batch's size, G rows each (generated now, by the policy after the first
    update)."""
    if not second_update(trainer):
        return inputs
    state, step = trainer.method_state, trainer.state.global_step
    if state.get("step") != step - 1:
        raise RuntimeError(f"CoDaPO's second update at step {step} found no selection from step {step - 1} (method "
                           f"state {state}): a checkpoint saved without it cannot resume")
    g = trainer.num_generations
    items = refocused(state["items"], trainer.method_settings["codapo_repeats"], len(inputs) // g)
    trainer.step_counts["codapo_items"] = items
    return [trainer.train_dataset[int(i)] for i in items for _ in range(g)]


def group_values(trainer, batch: dict) -> np.ndarray:
    """CoDaPO's value of each group of ``batch`` (its rows in groups of ``num_generations``)."""
    num_generations = trainer.num_generations
    logps = batch.get("old_per_token_logps")
    if logps is None:
        logps = completion_logps(trainer, batch)
    mean = mean_logps(logps, batch["completion_mask"]).view(-1, num_generations).float().cpu().numpy()
    return codapo_values(batch["correct"].view(-1, num_generations).cpu().numpy(), mean,
                         trainer.method_settings["codapo_weight_offset"])


def _scale(part: dict, values: np.ndarray, num_generations: int) -> None:
    import torch

    scale = torch.tensor(np.repeat(values, num_generations), dtype=part["advantages"].dtype,
                         device=part["advantages"].device)
    part["advantages"] = part["advantages"] * scale


def weigh_and_resample(trainer, batch: dict, generate: Generate) -> dict:
    """CoDaWeighting and CoDaSampling on a step's batch: every group's advantages scaled by its own value; the
    selected questions (``training.codapo_resample``) kept for the next step (two updates: the trainer's method
    state) or given ``training.codapo_repeats`` more groups now, appended to the batch (one update)."""
    num_generations, s = trainer.num_generations, trainer.method_settings
    values = group_values(trainer, batch)
    counts = trainer.step_counts
    counts["codapo_value"] = float(np.mean(values))
    counts["codapo_update"] = 2 if second_update(trainer) else 1
    if counts["codapo_update"] == 2:  # the selection's own step: weighed, nothing selected (the reference's odd step)
        _scale(batch, values, num_generations)
        return batch
    items = batch["item"].view(-1, num_generations)[:, 0]
    picks = selected(values, s["codapo_resample_share"], s["codapo_resample"], trainer.refill_seed,
                     trainer.state.global_step)
    counts["codapo_items"] = [int(items[p]) for p in picks]
    counts["codapo_selected"] = len(picks)
    if int(s["codapo_updates"]) == 2:
        trainer.method_state = {"step": int(trainer.state.global_step), "items": counts["codapo_items"]}
        _scale(batch, values, num_generations)
        return batch
    # each pick repeats times in turn (top and value pick K; percentile's picks are cycled and cut to K x repeats
    # groups, so a step's size is fixed)
    again = refocused(picks, s["codapo_repeats"], resample_count(len(values), s["codapo_resample_share"]) * int(
        s["codapo_repeats"]))
    extra = generate([trainer.train_dataset[int(items[p])] for p in again for _ in range(num_generations)])
    extra_values = group_values(trainer, extra)
    for part, v in ((batch, values), (extra, extra_values)):
        _scale(part, v, num_generations)
    if "old_per_token_logps" in batch and "old_per_token_logps" not in extra:
        extra = with_old_logps(trainer, extra)
    extra = {k: v for k, v in extra.items() if k in batch}
    merged = take_rows([batch, extra], [(0, list(range(len(batch["advantages"])))),
                                        (1, list(range(len(extra["advantages"]))))], pad_id(trainer))
    counts["codapo_extra_rollouts"] = len(extra["advantages"])
    return recount(trainer, merged)


def counts() -> dict:
    """A step's tally, before its hooks run."""
    return {"codapo_items": [], "codapo_extra_rollouts": 0, "codapo_selected": 0}


def metrics(c: dict) -> dict[str, float]:
    """What a CoDaPO step logs (train_log columns ``codapo/*``): the batch's mean value, the rollouts it added, the
    draw (the selected items; on a second update the items trained), which update of its batch the step is and how
    many questions it selected."""
    return {"codapo/value_mean": c["codapo_value"], "codapo/extra_rollouts": c["codapo_extra_rollouts"],
            "codapo/draw": draw_tag(c["codapo_items"]), "codapo/update": c["codapo_update"],
            "codapo/selected": c["codapo_selected"]}

"""Whether training had anything to learn from. GRPO's gradient comes only from groups (one prompt, G completions)
whose rewards differ: an arm whose every logged step had ``frac_reward_zero_std`` = 1 changed nothing, and a
comparison whose arms all did so learned nothing, whatever its table of gains says. The summary leads with that
(:func:`signal_lines`); ``grpo-budget pilot`` (:mod:`grpo_budget.score.pilot`) says it before a run, from the base
model's samples of the pool, in the same words (:data:`NOTHING`, :data:`CHANGE`)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from grpo_budget.experiment.plan import Listing

NOTHING = "this comparison will learn nothing"
CHANGE = ("change the pool (easier items, or a filter: to them), the base model, or the prompt and grading (so the "
          "model's answers can be read), or raise training.num_generations")


CORRECT = "rewards/correct/mean"  # TRL's log of the correct reward, when training.rewards has it


def _silent(log_path: str) -> str | None:
    """What a run's training log shows: ``"all"`` (no reward variance at any step), ``"correct"`` (the correct reward
    the same, 0 or 1, at every step, the other rewards varying), ``""`` (a signal), None (no log to tell)."""
    path = Path(log_path)
    if not path.exists():
        return None
    log = pd.read_parquet(path)
    if "frac_reward_zero_std" not in log:
        return None
    logged = log["frac_reward_zero_std"].dropna().astype(float)
    if not len(logged):
        return None
    if (logged >= 1.0).all():
        return "all"
    right = log[CORRECT].dropna().astype(float) if CORRECT in log else pd.Series(dtype=float)
    return "correct" if len(right) and ((right <= 0).all() or (right >= 1).all()) else ""


def silent_arms(runs: Listing) -> dict[tuple, dict[str, str]]:
    """Per (model, dataset, budget, variant): each policy's silence over every seed (``"all"`` only where every
    seed's is, ``"correct"`` where every seed's is one or the other, else ``""``)."""
    out: dict[tuple, dict[str, str]] = {}
    for r in runs.runs:
        silent = _silent(r.log)
        if silent is None:
            continue
        arms = out.setdefault((r.model, r.dataset, r.budget, r.variant), {})
        before = arms.get(r.policy, "all")
        arms[r.policy] = "" if "" in (before, silent) else "correct" if "correct" in (before, silent) else "all"
    return out


def signal_lines(runs: Listing) -> list[str]:
    """The summary's warnings: one per panel where no arm's training had a group with mixed rewards (or with mixed
    correctness: the other rewards alone varied), or naming the arms that had none."""
    lines = []
    for (model, dataset, budget, variant), arms in silent_arms(runs).items():
        quiet = [p for p, s in arms.items() if s]
        if not quiet:
            continue
        head = f"**No learning signal · {model} · {dataset} · budget {budget}" + (f" · {variant}" if variant else "")
        learned = NOTHING.replace("will learn", "learned")
        if len(quiet) == len(arms) and all(arms[p] == "all" for p in quiet):
            lines.append(f"{head}:** no arm's training saw a group of completions with different rewards "
                         f"(frac_reward_zero_std = 1 at every step of every seed): GRPO had no gradient, so {learned} "
                         f"and its gains are noise; `grpo-budget pilot` measures a pool's signal before a run; {CHANGE}.")
        elif len(quiet) == len(arms):
            lines.append(f"{head}:** no arm's training saw a right and a wrong completion of one prompt (the correct "
                         "reward was the same, 0 or 1, at every step of every seed): only the other rewards varied, so "
                         f"{learned} about correctness; `grpo-budget pilot` measures a pool's signal before a run; "
                         f"{CHANGE}.")
        else:
            which = "that arm learned nothing, so its gain is" if len(quiet) == 1 else \
                "those arms learned nothing, so their gains are"
            lines.append(f"{head}:** {', '.join(quiet)} had no reward variance (or no variance of correctness) at any "
                         f"training step: {which} noise.")
    return lines

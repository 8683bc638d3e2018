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


def _silent(log_path: str) -> bool | None:
    """Whether a run's training log shows no reward variance at any step (None: no log or no such column)."""
    path = Path(log_path)
    if not path.exists():
        return None
    log = pd.read_parquet(path)
    if "frac_reward_zero_std" not in log:
        return None
    logged = log["frac_reward_zero_std"].dropna().astype(float)
    return bool(len(logged)) and bool((logged >= 1.0).all())


def silent_arms(runs: Listing) -> dict[tuple, dict[str, bool]]:
    """Per (model, dataset, budget, variant): each policy's silence, true when every seed's log shows no reward
    variance at any step."""
    out: dict[tuple, dict[str, bool]] = {}
    for r in runs.runs:
        silent = _silent(r.log)
        if silent is None:
            continue
        arms = out.setdefault((r.model, r.dataset, r.budget, r.variant), {})
        arms[r.policy] = arms.get(r.policy, True) and silent
    return out


def signal_lines(runs: Listing) -> list[str]:
    """The summary's warnings: one per panel where no arm's training had a group with mixed rewards (nothing was
    learned), or naming the arms that had none."""
    lines = []
    for (model, dataset, budget, variant), arms in silent_arms(runs).items():
        quiet = [p for p, s in arms.items() if s]
        if not quiet:
            continue
        head = f"**No learning signal · {model} · {dataset} · budget {budget}" + (f" · {variant}" if variant else "")
        if len(quiet) == len(arms):
            lines.append(f"{head}:** no arm's training saw a group of completions with different rewards "
                         "(frac_reward_zero_std = 1 at every step of every seed): GRPO had no gradient, so "
                         f"{NOTHING.replace('will learn', 'learned')} and its gains are noise; `grpo-budget pilot` "
                         f"measures a pool's signal before a run; {CHANGE}.")
        else:
            which = "that arm learned nothing, so its gain is" if len(quiet) == 1 else \
                "those arms learned nothing, so their gains are"
            lines.append(f"{head}:** {', '.join(quiet)} had no reward variance at any training step "
                         f"(frac_reward_zero_std = 1): {which} noise.")
    return lines

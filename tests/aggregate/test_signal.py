"""The summary's warning when training saw no reward variance (issue 55): a run whose every GRPO group had equal
rewards (frac_reward_zero_std = 1 at every logged step) learned nothing, and the summary says so before its gains."""

from __future__ import annotations

import pandas as pd

from grpo_budget.aggregate.signal import NOTHING, signal_lines, silent_arms
from grpo_budget.experiment.plan import Listing, RunFiles


def listing(tmp_path, logs: dict[tuple[str, str, int], list[float]], correct: dict | None = None) -> Listing:
    runs = []
    for (dataset, policy, seed), fracs in logs.items():
        log = tmp_path / f"{dataset}-{policy}-{seed}.parquet"
        frame = pd.DataFrame({"step": range(1, len(fracs) + 1), "frac_reward_zero_std": fracs})
        if correct and (dataset, policy, seed) in correct:
            frame["rewards/correct/mean"] = correct[dataset, policy, seed]
        frame.to_parquet(log)
        runs.append(RunFiles("m", dataset, policy, "0.2", seed, "", str(log), "", {}))
    return Listing(runs=runs, base=[], scores=[], tests={}, num_generations=4, prompts_per_step=2)


def test_no_reward_variance_at_any_step_is_said_first(tmp_path):
    nan = float("nan")
    runs = listing(tmp_path, {("mcq", "hard", 0): [1.0, 1.0, nan], ("mcq", "random", 0): [1.0, 1.0, nan],
                              ("mcq", "hard", 1): [1.0, 1.0],
                              ("words", "hard", 0): [1.0, 1.0], ("words", "random", 0): [1.0, 0.75],
                              ("math", "hard", 0): [0.5, 0.25]})
    assert silent_arms(runs)[("m", "mcq", "0.2", "")] == {"hard": "all", "random": "all"}
    lines = signal_lines(runs)
    assert len(lines) == 2  # math learned: no line
    assert lines[0].startswith("**No learning signal · m · mcq · budget 0.2:** no arm's training saw a group")
    assert NOTHING.replace("will learn", "learned") in lines[0] and "`grpo-budget pilot`" in lines[0]
    assert lines[1] == ("**No learning signal · m · words · budget 0.2:** hard had no reward variance (or no variance "
                        "of correctness) at any training step: that arm learned nothing, so its gain is noise.")


def test_one_seed_with_variance_keeps_an_arm_out(tmp_path):
    runs = listing(tmp_path, {("d", "hard", 0): [1.0, 1.0], ("d", "hard", 1): [1.0, 0.5]})
    assert signal_lines(runs) == []


def test_a_shaping_reward_varying_alone_is_no_signal_of_correctness(tmp_path):
    """A length bonus gives every group some variance, while no completion is ever right: still nothing learned
    about correctness."""
    runs = listing(tmp_path, {("d", "hard", 0): [0.0, 0.0], ("d", "random", 0): [0.0, 0.0]},
                   correct={("d", "hard", 0): [0.0, 0.0], ("d", "random", 0): [0.0, 0.0]})
    (line,) = signal_lines(runs)
    assert "no arm's training saw a right and a wrong completion of one prompt" in line
    runs = listing(tmp_path, {("d", "hard", 0): [0.0, 0.0]}, correct={("d", "hard", 0): [0.0, 0.25]})
    assert signal_lines(runs) == []

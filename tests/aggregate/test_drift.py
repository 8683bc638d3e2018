"""Drift: the transitions between all-fail, mixed and all-solved on hand-made before and after tables."""

from __future__ import annotations

import pandas as pd
import pytest

from grpo_budget.aggregate import drift


def _counts(ids, n, k) -> pd.DataFrame:
    return pd.DataFrame({"id": ids, "n_samples": n, "n_correct": k})


def test_outcome_over_each_items_own_samples():
    assert list(drift.outcome([0, 3, 8, 2, 2], [8, 8, 8, 2, 16])) == ["fail", "mixed", "solved", "solved", "mixed"]
    for k, n in (([1], [0]), ([9], [8]), ([float("nan")], [8]), ([-1], [4])):
        with pytest.raises(ValueError):
            drift.outcome(k, n)


def test_transitions_by_hand():
    # Before (the pool's scoring), ten items: four all-fail, four mixed, two all-solved (adaptive: unequal counts).
    before = _counts([f"i{j}" for j in range(10)] + ["other"], [8, 8, 8, 2, 8, 8, 16, 8, 8, 4, 8],
                     [0, 0, 0, 0, 3, 1, 8, 5, 8, 4, 2])
    # After (the trained model, the same counts): i0 stays at 0; i1, i2 become mixed; i3 all-solved;
    # i4 stays mixed; i5 falls to 0; i6 and i7 become all-solved; i8 stays; i9 falls to mixed.
    after = _counts([f"i{j}" for j in range(10)], [8, 8, 8, 2, 8, 8, 16, 8, 8, 4],
                    [0, 1, 7, 2, 4, 0, 16, 8, 8, 3])
    m = drift.transitions(before, after)
    assert list(m.index) == list(m.columns) == ["fail", "mixed", "solved"]
    assert m.loc["fail"].tolist() == [1, 2, 1]
    assert m.loc["mixed"].tolist() == [1, 1, 2]
    assert m.loc["solved"].tolist() == [0, 1, 1]
    assert int(m.to_numpy().sum()) == 10  # "other" was not rescored: not counted
    row = drift.flat(m)
    assert list(row) == drift.TRANSITIONS
    assert (row["fail_to_mixed"], row["mixed_to_solved"], row["solved_to_mixed"]) == (2, 2, 1)
    s = drift.shares(row)
    assert s["mixed_before"] == pytest.approx(0.4) and s["mixed_after"] == pytest.approx(0.4)
    assert s["fail_moved"] == pytest.approx(0.75) and s["mixed_solved"] == pytest.approx(0.5)


def test_an_unchanged_model_gives_the_diagonal_and_a_foreign_item_is_refused():
    before = _counts(["a", "b", "c"], [8, 8, 8], [0, 4, 8])
    m = drift.transitions(before, before.iloc[::-1])  # order does not matter: matched by id
    assert m.to_numpy().tolist() == [[1, 0, 0], [0, 1, 0], [0, 0, 1]]
    with pytest.raises(ValueError, match="'z'"):
        drift.transitions(before, _counts(["a", "z"], [8, 8], [0, 0]))
    empty = drift.shares(drift.flat(drift.transitions(before, before.iloc[:0])))
    assert all(pd.isna(v) for v in empty.values())


def _drift_file(path, n_before, k_before, n_after, k_after, step=6, paired=True) -> str:
    pd.DataFrame({"id": [f"i{j}" for j in range(len(k_after))], "n_samples": n_after, "n_correct": k_after,
                  "pass_rate": [k / n for k, n in zip(k_after, n_after)], "n_samples_before": n_before,
                  "n_correct_before": k_before, "paired": paired, "step": step}).to_parquet(path)
    return str(path)


def _train_log(path, zero_std) -> str:
    pd.DataFrame({"step": range(1, len(zero_std) + 1), "frac_reward_zero_std": zero_std,
                  "loss": 0.0}).to_parquet(path)
    return str(path)


def test_learnable_shares_over_the_first_last_and_all_logged_steps():
    from grpo_budget.aggregate.render_drift import learnable_shares

    log = pd.DataFrame({"step": [1, 2, 3, 4, 5], "frac_reward_zero_std": [0.5, 0.25, 0.0, 0.75, 1.0]})
    s = learnable_shares(log, 2)  # learnable 0.5, 0.75, 1.0, 0.25, 0.0
    assert s["logged_steps"] == 5 and s["window_steps"] == 2
    assert s["learnable_first_pct"] == pytest.approx(62.5) and s["learnable_last_pct"] == pytest.approx(12.5)
    assert s["learnable_all_pct"] == pytest.approx(50.0)
    assert learnable_shares(log, 0.2)["learnable_first_pct"] == pytest.approx(50.0)  # a fraction: one step of five
    assert pd.isna(learnable_shares(pd.DataFrame({"step": [1]}), 1)["learnable_all_pct"])


def test_the_drift_table_from_hand_made_files(tmp_path):
    """Two seeds of hard and one of random, drift and train-log files made by hand: the per-seed CSV counts each
    file's moves; the Markdown sums an arm's seeds and shows the learnable shares beside them."""
    from grpo_budget.aggregate.run import run
    from grpo_budget.experiment.plan import Listing, RunFiles

    files = {  # (before n, before k, after n, after k), learnable per logged step (1 - frac_reward_zero_std)
        ("hard", 0): (([8, 8, 8, 4], [0, 0, 0, 1], [8, 8, 8, 4], [0, 3, 8, 4]), [0.5, 0.5, 0.25]),
        ("hard", 1): (([8, 8, 8, 8], [0, 0, 2, 5], [8, 8, 8, 8], [2, 0, 8, 5]), [0.75, 0.5, 0.5]),
        ("random", 0): (([8, 8], [4, 8], [8, 8], [8, 8]), [0.0, 0.5, 0.5]),
    }
    runs = []
    for (policy, seed), (counts, learnable) in files.items():
        folder = tmp_path / f"{policy}{seed}"
        folder.mkdir()
        runs.append(RunFiles("m", "d", policy, "0.1", seed, str(folder / "subset.parquet"),
                             _train_log(folder / "log.parquet", [1 - x for x in learnable]),
                             str(folder / "manifest.json"), {}, drift=_drift_file(folder / "drift.parquet", *counts)))
    listing = Listing(runs=runs, base=[], scores=[], tests={}, num_generations=4, prompts_per_step=8)
    outs = [str(tmp_path / f"drift.{ext}") for ext in ("csv", "md", "html")]
    run("drift", listing, outs, {"learnable_window": 1})

    per_seed = pd.read_csv(outs[0]).set_index(["policy", "seed"])
    assert per_seed.loc[("hard", 0), ["fail_to_fail", "fail_to_mixed", "fail_to_solved"]].tolist() == [1, 1, 1]
    assert per_seed.loc[("hard", 0), "mixed_to_solved"] == 1 and per_seed.loc[("hard", 0), "items"] == 4
    assert per_seed.loc[("hard", 1), ["fail_to_mixed", "fail_to_fail", "mixed_to_solved", "mixed_to_mixed"]].tolist() \
        == [1, 1, 1, 1]
    assert per_seed.loc[("random", 0), ["mixed_to_solved", "solved_to_solved"]].tolist() == [1, 1]
    assert per_seed.loc[("hard", 0), "learnable_first_pct"] == pytest.approx(50.0)
    assert per_seed.loc[("hard", 0), "learnable_last_pct"] == pytest.approx(25.0)
    assert per_seed.loc[("random", 0), "learnable_all_pct"] == pytest.approx(100 / 3)
    assert per_seed["paired"].all() and (per_seed["step"] == 6).all() and "variant" not in per_seed

    md = open(outs[1]).read()
    header = next(line for line in md.splitlines() if line.startswith("| policy"))
    hard = next(line for line in md.splitlines() if line.startswith("| hard"))
    cells = dict(zip([c.strip() for c in header.split("|")[1:-1]], [c.strip() for c in hard.split("|")[1:-1]]))
    # hard, summed over its two seeds: 5 all-fail items before (2 stay, 2 to mixed, 1 to all-solved), 3 mixed
    # (1 stays, 2 to all-solved); learnable shares: the seeds' mean.
    assert (cells["seeds"], cells["items"]) == ("2", "8")
    assert (cells["all-fail → all-fail"], cells["all-fail → mixed"], cells["all-fail → all-solved"]) == ("2", "2", "1")
    assert (cells["mixed → mixed"], cells["mixed → all-solved"]) == ("1", "2")
    assert cells["mixed before %"] == "37.5" and cells["mixed after %"] == "37.5"  # 3 of 8, and 2 + 1 of 8
    assert cells["all-fail moved %"] == "60.0" and cells["mixed → all-solved %"] == "66.7"
    assert cells["learnable, first steps %"] == "62.5" and cells["learnable, last steps %"] == "37.5"
    assert "Not paired" not in md and "m · d" in md


def test_an_unpaired_drift_file_is_said_so(tmp_path):
    from grpo_budget.aggregate.run import run
    from grpo_budget.experiment.plan import Listing, RunFiles

    r = RunFiles("m", "d", "hard", "0.1", 0, "", _train_log(tmp_path / "log.parquet", [0.5]), "", {},
                 drift=_drift_file(tmp_path / "drift.parquet", [8], [0], [8], [1], paired=False))
    outs = [str(tmp_path / f"drift.{ext}") for ext in ("csv", "md")]
    run("drift", Listing(runs=[r], base=[], scores=[], tests={}, num_generations=4, prompts_per_step=8), outs, {})
    assert "Not paired" in open(outs[1]).read()

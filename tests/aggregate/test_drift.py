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

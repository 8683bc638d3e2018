"""The drift job's draws: adaptive scoring's rounds replayed from a score table, and the base model replayed on a
subset giving the scoring's own samples back (so that every move a trained model shows is its weights')."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from grpo_budget.aggregate import drift as drift_table
from grpo_budget.config.settings import Adaptive, Generation
from grpo_budget.prepare import framearith
from grpo_budget.score import adaptive, drift, scoring

SETTINGS = Adaptive(first=2, step=2, max_samples=12, confidence=0.9, mean_samples=6, tolerance=0.0)
CUTS = {"policies": ["hard", "easy", "learnable"], "budgets": [0.2], "rounding": "half_up", "group_size": 4}


def _simulated_scoring(p: np.ndarray, settings: Adaptive, seed: int) -> tuple[list[list[bool]], list[np.ndarray]]:
    """Adaptive scoring of items with true pass rates ``p``, drawn by numpy: each item's correct flags in round
    order, and the samples each round gave each item."""
    rng = np.random.default_rng(seed)
    targets = scoring.adaptive_targets(CUTS, len(p))
    k, n = np.zeros(len(p), int), np.zeros(len(p), int)
    correct: list[list[bool]] = [[] for _ in p]
    rounds = []
    while (more := adaptive.allocation(k, n, settings, targets, seed, CUTS["group_size"])).any():
        for i in np.flatnonzero(more):
            flags = list(rng.random(more[i]) < p[i])
            correct[i] += flags
            k[i] += sum(flags)
        n += more
        rounds.append(more)
    return correct, rounds


def test_the_rounds_replay_from_the_correct_flags_alone():
    p = np.random.default_rng(1).beta(0.6, 1.4, 80)
    correct, rounds = _simulated_scoring(p, SETTINGS, seed=5)
    assert len(rounds) >= 3, "the test needs several rounds"
    replayed = drift.replay(correct, SETTINGS, scoring.adaptive_targets(CUTS, len(p)), 5, CUTS["group_size"])
    assert [r.tolist() for r in replayed] == [r.tolist() for r in rounds]
    # A table whose counts the rule cannot have made (an item given one sample more) does not replay.
    tampered = [list(c) for c in correct]
    tampered[0].append(True)
    assert drift.replay(tampered, SETTINGS, scoring.adaptive_targets(CUTS, len(p)), 5, CUTS["group_size"]) is None


def test_fixed_k_scoring_is_one_round_at_the_scoring_seed():
    scores = pd.DataFrame({"id": ["a", "b"], "n_samples": [8, 8], "n_correct": [0, 3], "correct": [[False] * 8] * 2})
    g = Generation.from_dict({"seed": 7})
    rounds, paired = drift.draws(scores, g, None, None)
    assert paired and len(rounds) == 1 and rounds[0][0] == 7 and rounds[0][1].tolist() == [8, 8]


def test_the_base_model_replayed_gives_the_scorings_samples_back(tmp_path, tiny_model_dir):
    """An untrained tiny model graded on any digit (a mix of outcomes): adaptive scoring of 30 items, then the drift
    job with no adapter on 10 of them: the same samples, item by item, and so the diagonal transition matrix."""
    from grpo_budget.generation.backends import from_settings

    pool = framearith.generate(30, seed=0, width=4, min_ops=1, max_ops=3)
    dataset = {"grading": {"mode": "lenient", "pattern": r"(\d)"}, "prompt": {"chat_template": False}}
    g = Generation.from_dict({"max_new_tokens": 4, "batch_size": 256, "seed": 3})
    gen = from_settings(str(tiny_model_dir), g)
    graded = scoring.score_in_rounds(gen, pool, dataset, g, SETTINGS, CUTS, tmp_path / "rounds", {})
    scores = pool.merge(graded, on="id")
    assert scores["n_samples"].nunique() > 1 and 0 < scores["n_correct"].sum() < scores["n_samples"].sum()
    scores.to_parquet(tmp_path / "scores.parquet")
    subset = scores.iloc[::3][["id"]]
    subset.to_parquet(tmp_path / "subset.parquet")

    rounds, paired = drift.draws(scores, g, SETTINGS, CUTS)
    assert paired and len(rounds) >= 2
    inside = scores["id"].isin(subset["id"]).to_numpy()
    again = drift.graded_again(gen, scores[inside], [(s, c[inside]) for s, c in rounds], dataset, g)
    want = scores[inside].reset_index(drop=True)
    assert again["samples"].map(list).tolist() == want["samples"].map(list).tolist()

    out = drift.rescore(str(tiny_model_dir), str(tmp_path / "scores.parquet"), str(tmp_path / "subset.parquet"),
                        None, str(tmp_path / "drift.parquet"), g, SETTINGS, dataset, CUTS)
    assert out["paired"].all() and (out["step"] == 0).all()
    assert out["n_samples"].tolist() == out["n_samples_before"].tolist()
    assert out["n_correct"].tolist() == out["n_correct_before"].tolist()
    m = drift_table.transitions(scores[["id", "n_samples", "n_correct"]], out)
    assert int(np.trace(m.to_numpy())) == len(subset)
    assert pd.read_parquet(tmp_path / "drift.parquet").columns.tolist() == drift.DRIFT_COLUMNS

    # A score table from other scoring code (one item's samples cut short) no longer replays: unpaired, and said so.
    cut = scores.copy()
    j = int(np.flatnonzero(cut["n_samples"].to_numpy() > SETTINGS.first)[0])
    cut.at[j, "correct"] = list(cut.at[j, "correct"])[:-1]
    cut.at[j, "n_samples"] -= 1
    assert drift.draws(cut, g, SETTINGS, CUTS)[1] is False

"""The drift job: an arm's subset scored again by its trained model (the final adapter of its manifest) with the
pool's scoring settings and, item by item, the scoring's own draws: as many samples per item, each from the random
stream it had when the pool was scored.

Generation is keyed by (seed, item, sample index) (:mod:`grpo_budget.generation.keyed`; vLLM seeds each request
the same way), and adaptive scoring's rounds follow from the counts alone (:func:`grpo_budget.score.adaptive.allocation`
is a function of them), so the rounds, their seeds and each item's samples in them are replayed from the score
table. With the same draws an item whose model did not change keeps its outcome: the base model replayed gives the
score table back, and every move :mod:`grpo_budget.aggregate.drift` counts is the weights', not fresh luck (fresh
samples would move items chosen for their 0 of K to mixed by chance alone: the winner's curse).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import pandas as pd

from grpo_budget.errors import UserError
from grpo_budget.config.settings import Adaptive, Generation
from grpo_budget.generation.backends import Generator, from_settings
from grpo_budget.generation.sample import sample_and_grade
from grpo_budget.generation.sampling import Sampling
from grpo_budget.io import read_json, read_parquet, write_parquet
from grpo_budget.score import adaptive as adaptive_mod
from grpo_budget.score.scoring import adaptive_targets, merge_rounds
from grpo_budget.train.checkpoints import verify_listed

log = logging.getLogger(__name__)

DRIFT_COLUMNS = ["id", "n_samples", "n_correct", "pass_rate", "n_samples_before", "n_correct_before", "paired",
                 "step"]


def replay(correct: Sequence[Sequence[bool]], settings: Adaptive, cuts: list, seed: int,
           num_generations: int | None = None) -> list[np.ndarray] | None:
    """The samples each item drew in each round of adaptive scoring, from its graded samples in round order (the
    score table's ``correct`` lists, in the pool's order): the allocation of each round is a function of the counts
    before it. None when the replay does not end at the table's counts (a table made by other scoring code)."""
    total = np.array([len(c) for c in correct], dtype=int)
    k, n = np.zeros(len(total), dtype=int), np.zeros(len(total), dtype=int)
    rounds = []
    while True:
        more = adaptive_mod.allocation(k, n, settings, cuts, seed, num_generations)
        if not more.any():
            break
        if np.any(n + more > total):
            return None
        k += np.array([int(sum(c[a:b])) for c, a, b in zip(correct, n, n + more)], dtype=int)
        n += more
        rounds.append(more)
    return rounds if np.array_equal(n, total) else None


def draws(scores: pd.DataFrame, g: Generation, settings: Adaptive | None, cuts: dict | None
          ) -> tuple[list[tuple[int, np.ndarray]], bool]:
    """The scoring's draws of every pool item: per round, its sampling seed and each item's samples in it; and
    whether they are the scoring's own (False: a table whose rounds do not replay, whose items then draw their count
    in one round at the scoring seed, the first round's draws alone shared with the scoring)."""
    counts = scores["n_samples"].to_numpy(int)
    if settings is None:  # fixed K: one call at the scoring seed
        return [(g.seed, counts)], True
    rounds = replay(list(scores["correct"]), settings, adaptive_targets(cuts or {}, len(scores)), g.seed,
                    (cuts or {}).get("group_size"))
    if rounds is None:
        log.warning("the score table's adaptive rounds do not replay with this scoring code: each item draws its "
                    "count at the scoring seed instead (paired: false)")
        return [(g.seed, counts)], False
    return [(adaptive_mod.round_seed(g.seed, r), m) for r, m in enumerate(rounds)], True


def final_adapter(manifest_path: str) -> tuple[int, str]:
    """The step and folder of a training manifest's last checkpoint, once its weights match their recorded sha256."""
    listed = read_json(manifest_path)["checkpoints"]
    step, path = verify_listed(manifest_path, listed[-1:])[-1]
    return int(step), str(path)


def graded_again(gen: Generator, items: pd.DataFrame, rounds: list[tuple[int, np.ndarray]], dataset: dict,
                 g: Generation, adapter: str | None = None) -> pd.DataFrame:
    """``items`` sampled and graded round by round (``rounds``: each round's seed and each item's samples in it),
    one row per item (:data:`grpo_budget.generation.sample.GRADED_COLUMNS`, samples in round order), in ``items``'
    order."""
    graded = []
    for seed, counts in rounds:
        for m in np.unique(counts[counts > 0]):  # one generate call per sample count, as scoring makes them
            sampling = replace(Sampling.of(g), n=int(m), seed=int(seed))
            graded.append(sample_and_grade(gen, items[counts == m], dataset, sampling, adapter=adapter))
    return merge_rounds(graded).set_index("id").reindex(items["id"]).reset_index()


def rescore(model: str, scores_path: str, subset_path: str, manifest_path: str | None, out_path: str,
            g: Generation, settings: Adaptive | None, dataset: dict, cuts: dict | None = None) -> pd.DataFrame:
    """Per item of the subset: the trained model's samples and correct ones (``n_samples``, ``n_correct``,
    ``pass_rate``) with the scoring's draws (:func:`draws`), beside the scoring's counts (``*_before``); ``paired``:
    whether the draws are the scoring's own; ``step``: the checkpoint's (0: no manifest, the base model replayed)."""
    cols = ["id", "prompt", "answer", "answer_type", "n_samples", "n_correct", "correct"]
    scores = read_parquet(scores_path, cols)
    if scores["n_correct"].isna().any():
        raise UserError(f"{scores_path}: the pool has no gold answers (an unlabeled pool): drift needs its "
                        "scoring's correct counts; set analysis.drift: false")
    wanted = read_parquet(subset_path, ["id"])["id"]
    inside = scores["id"].isin(wanted).to_numpy()
    if inside.sum() != wanted.nunique():
        raise UserError(f"{subset_path}: {wanted.nunique() - int(inside.sum())} item(s) are not in {scores_path}")
    rounds, paired = draws(scores, g, settings, cuts)
    step, adapter = final_adapter(manifest_path) if manifest_path else (0, None)
    items = scores[inside]
    after = graded_again(from_settings(model, g, adapters=adapter is not None), items,
                         [(seed, counts[inside]) for seed, counts in rounds], dataset, g, adapter)
    out = after[["id", "n_samples", "n_correct", "pass_rate"]].assign(
        n_samples_before=items["n_samples"].to_numpy(int), n_correct_before=items["n_correct"].to_numpy(int),
        paired=paired, step=step)
    write_parquet(out[DRIFT_COLUMNS], out_path)
    return out[DRIFT_COLUMNS]

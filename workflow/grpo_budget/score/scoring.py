"""Difficulty scoring of the pool: the base model's pass rate over K samples per item (:func:`score`), or over
adaptive rounds until every configured cut is settled (:func:`score_in_rounds`; the doubt rule is
:mod:`grpo_budget.score.adaptive`), with agreement columns and the empirical-Bayes posterior. Sampling and grading is
:func:`grpo_budget.generation.sample.sample_and_grade`."""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import pandas as pd

from grpo_budget.digest import model_digest
from grpo_budget.errors import UserError
from grpo_budget.config.settings import Adaptive, Generation
from grpo_budget.generation.backends import Generator, from_settings
from grpo_budget.generation.sampling import Sampling
from grpo_budget.generation.sample import GRADED_COLUMNS, sample_and_grade
from grpo_budget.io import numbered_path, read_json, read_parquet, write_json, write_parquet
from grpo_budget.score import adaptive as adaptive_mod
from grpo_budget.score import agreement
from grpo_budget.select.posterior import EB_COLUMNS, with_posterior

log = logging.getLogger(__name__)


def score(model: str, pool_path: str, out_path: str, g: Generation, adaptive: Adaptive | None, dataset: dict,
          cuts: dict | None = None) -> pd.DataFrame:
    """Difficulty of every pool item: the base model's pass rate over ``g.num_samples`` samples, or, with
    ``adaptive`` settings, over as many as the ``cuts`` (:func:`grpo_budget.experiment.plan.adaptive_cuts`) need."""
    pool = read_parquet(pool_path)
    if pool.empty:
        raise UserError(f"{pool_path}: the pool has no items; check the dataset's filter, splits and sizes")
    gen = from_settings(model, g)
    if adaptive is not None:
        graded = score_in_rounds(gen, pool, dataset, g, adaptive, cuts or {}, Path(f"{out_path}.rounds"),
                                 {"model": model_digest(model)})
    else:
        graded = sample_and_grade(gen, pool, dataset, Sampling.of(g))
    meta = pool.drop(columns=[c for c in GRADED_COLUMNS + EB_COLUMNS + agreement.AGREEMENT_COLUMNS
                              if c != "id" and c in pool.columns])
    graded = pd.concat([graded, agreement.agreement_columns(graded["answers"])], axis=1)
    out = meta.merge(with_posterior(graded), on="id", how="left", validate="one_to_one")
    write_parquet(out, out_path)
    return out


def merge_rounds(rounds: list[pd.DataFrame]) -> pd.DataFrame:
    """One graded row per item from its rows of several rounds (each :data:`grpo_budget.generation.sample.GRADED_COLUMNS`): samples
    concatenated in round order, counts summed, the mean completion length weighted by samples."""
    rows = []
    for item_id, parts in pd.concat(rounds, ignore_index=True).groupby("id", sort=False):
        n = int(parts["n_samples"].sum())
        k = int(parts["n_correct"].sum())
        tokens = float((parts["mean_completion_tokens"] * parts["n_samples"]).sum() / n) if n else float("nan")
        rows.append({
            "id": item_id,
            "samples": [x for xs in parts["samples"] for x in xs],
            "answers": [x for xs in parts.get("answers", parts["samples"].map(lambda v: [None] * len(v))) for x in xs],
            "correct": [bool(x) for xs in parts["correct"] for x in xs],
            "format_ok": [bool(x) for xs in parts["format_ok"] for x in xs],
            "n_samples": n,
            "n_correct": k,
            "pass_rate": k / n if n else float("nan"),
            "n_format_fail": int(parts["n_format_fail"].sum()),
            "mean_completion_tokens": tokens,
            "n_truncated": int(parts["n_truncated"].sum()),
        })
    return pd.DataFrame(rows, columns=GRADED_COLUMNS)


ROUND_FILE = "round-{:03d}.parquet"
ROUNDS_FINGERPRINT = "fingerprint.json"


def _completed_rounds(folder: Path, record: dict) -> list[pd.DataFrame]:
    """The rounds a killed job completed, if they were drawn with the same model, settings, cuts and pool; rounds of
    anything else are moved aside to ``<folder>.stale-N`` (never resumed from, never deleted)."""
    try:
        old = read_json(folder / ROUNDS_FINGERPRINT)
    except (OSError, ValueError):
        old = None
    if old != record and folder.exists():
        moved = numbered_path(f"{folder}.stale-")
        folder.rename(moved)
        log.warning("%s holds rounds of another scoring run: moved them to %s; scoring starts afresh", folder, moved)
    write_json(record, folder / ROUNDS_FINGERPRINT)
    out = []
    while (folder / ROUND_FILE.format(len(out))).exists():
        out.append(read_parquet(folder / ROUND_FILE.format(len(out))))
    return out


def score_in_rounds(gen: Generator, pool: pd.DataFrame, dataset: dict, g: Generation, adaptive: Adaptive,
                    cuts: dict, folder: Path, record: dict) -> pd.DataFrame:
    """Adaptive scoring (:mod:`grpo_budget.score.adaptive`): rounds of samples until every item's side of every cut is
    settled or it has ``max_samples``. Each round is saved to ``folder`` as it completes, so a killed job resumes
    after its last completed round, if the model (``record``), settings, cuts and pool are the same; the folder is
    removed once the scores are complete."""
    targets = adaptive_targets(cuts, len(pool))
    pool_digest = hashlib.sha256(pd.util.hash_pandas_object(pool[["id", "prompt", "answer"]].astype(str),
                                                            index=False).values.tobytes()).hexdigest()
    record = dict(record, generation=asdict(g), adaptive=asdict(adaptive), cuts=cuts, pool=pool_digest)
    record = json.loads(json.dumps(record, sort_keys=True, default=str))
    rounds = _completed_rounds(folder, record)
    if rounds:
        log.info("resuming adaptive scoring after %d completed round(s) in %s", len(rounds), folder)
    ids = pool["id"].to_numpy()
    # Running counts per item: the allocation needs only these, not the rounds' samples merged anew each round.
    k, n = np.zeros(len(pool), int), np.zeros(len(pool), int)

    def add(counts: pd.DataFrame) -> None:
        c = counts.set_index("id").reindex(ids)
        k[:] += c["n_correct"].fillna(0).to_numpy(int)
        n[:] += c["n_samples"].fillna(0).to_numpy(int)

    for done in rounds:
        add(done)
    while True:
        more = adaptive_mod.allocation(k, n, adaptive, targets, g.seed, cuts.get("group_size"))  # the cuts' name for G
        if not more.any():
            break
        r = len(rounds)
        graded = []
        for m in np.unique(more[more > 0]):  # one generate call per sample count (usually one)
            sampling = replace(Sampling.of(g), n=int(m), seed=adaptive_mod.round_seed(g.seed, r))
            graded.append(sample_and_grade(gen, pool[more == m], dataset, sampling))
        rounds.append(pd.concat(graded, ignore_index=True))
        write_parquet(rounds[-1], folder / ROUND_FILE.format(r))
        add(rounds[-1])
        log.info("round %d: %d samples on %d items (%d samples in all)", r, int(more.sum()),
                 int((more > 0).sum()), int(n.sum()))
    out = merge_rounds(rounds).set_index("id").reindex(ids).reset_index()
    shutil.rmtree(folder, ignore_errors=True)
    return out


def adaptive_targets(cuts: dict, pool_size: int) -> list:
    """The cuts of a score job's ``cuts`` (see :func:`grpo_budget.experiment.plan.adaptive_cuts`) for a pool of this size."""
    return adaptive_mod.targets(cuts.get("policies", []), cuts.get("budgets", []), pool_size,
                                cuts.get("rounding", "half_up"))



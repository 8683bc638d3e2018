"""The cost plan's rates: time per job from this project's own measurements (the ``benchmark:`` files of earlier
runs, joined to each job's work through the ``plan/jobs.csv`` the plan wrote there), fitted per kind of work and
model size; where nothing was measured, the defaults of :mod:`grpo_budget.hardware`.

Time = startup + per decoding step x sequential decoding steps + per token x tokens (:class:`Rate`). A training
job's own log splits its time into the training loop (``train_runtime``) and the startup around it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from grpo_budget.hardware import DEFAULTS, Hardware
from grpo_budget.experiment.rules import CPU, GENERATE, TRAIN
from grpo_budget.cluster.work import JOBS_FILE, Job, log_path

GENERATION_LOG = r"generated \d+ completions in ([0-9.]+) s"  # grpo_budget.generation.sample.sample_and_grade's line in a job's log


@dataclass(frozen=True)
class Rate:
    """Seconds of a job = ``startup`` + ``per_pass`` x its sequential decoding steps + ``per_token`` x its tokens
    (generated, or trained on). A decoding step costs the same for any batch while it is bound by reading the
    weights (or, on a CPU with a tiny model, by per-step overhead); tokens count once the batch saturates compute.
    CPU rules: ``startup`` alone."""

    startup: float
    per_pass: float
    per_token: float
    source: str
    n: int = 0  # measured jobs behind it

    def seconds(self, job: Job) -> float:
        return self.startup + self.per_pass * job.passes + self.per_token * job.work


def _benchmark_seconds(path: Path) -> float | None:
    try:
        frame = pd.read_csv(path, sep="\t")
        return float(frame["s"].mean())
    except Exception:  # absent or not a benchmark file
        return None


def _train_loop_seconds(train_log: Path) -> float | None:
    """The training loop's own seconds (the Trainer's ``train_runtime``) from a run's ``train_log.parquet``; a
    resumed run's loop covers only the steps it trained, so it counts only when trained from step 0."""
    try:
        log = pd.read_parquet(train_log)
    except Exception:
        return None
    if "train_runtime" not in log or (log.get("resumed_from", pd.Series([0])) != 0).any():
        return None
    runtime = log["train_runtime"].dropna()
    return float(runtime.iloc[-1]) if len(runtime) else None


def _generation_seconds(log_file: Path) -> float | None:
    """Seconds a generation job spent generating (the sum of its :data:`GENERATION_LOG` lines), or None."""
    try:
        found = re.findall(GENERATION_LOG, log_file.read_text(errors="replace"))
    except OSError:
        return None
    return sum(float(x) for x in found) if found else None


def measurements(folders: list[str]) -> pd.DataFrame:
    """One row per measured job in ``folders`` (results folders with ``plan/jobs.csv``): its rule, kind, model size,
    work, seconds (benchmark ``s``) and, for training, the loop's seconds."""
    rows = []
    for folder in folders:
        table = Path(folder) / JOBS_FILE
        if not table.exists():
            continue
        listed = pd.read_csv(table)
        root = Path(folder)
        for job in listed.itertuples():
            seconds = _benchmark_seconds(root / job.benchmark)
            if seconds is None:
                continue
            loop = None
            if job.kind == TRAIN and isinstance(job.train_log, str):
                loop = _train_loop_seconds(root / job.train_log)
            elif job.kind == GENERATE:
                loop = _generation_seconds(root / log_path(job.rule, job.name))
            rows.append(dict(folder=str(folder), rule=job.rule, kind=job.kind, name=job.name,
                             size_b=float(job.size_b), passes=float(job.passes), work=float(job.work),
                             seconds=seconds, loop_seconds=loop))
    return pd.DataFrame(rows, columns=["folder", "rule", "kind", "name", "size_b", "passes", "work", "seconds",
                                       "loop_seconds"])


def _fit(rows: pd.DataFrame, y: str = "seconds", startup: bool = True) -> tuple[float, float, float] | None:
    """Non-negative least squares of ``y`` = startup + per_pass x passes + per_token x work over jobs of one kind
    and model size; None when the jobs do not vary enough to tell the terms apart (then see :func:`fit_rates`)."""
    cols = ([np.ones(len(rows))] if startup else []) + [rows["passes"].to_numpy(float), rows["work"].to_numpy(float)]
    if startup:  # three terms: steps and tokens must each vary
        varied = [c for c in cols[1:] if c.max() > 0 and c.max() >= 1.5 * max(c.min(), 1e-9)]
        told_apart = len(varied) == 2
    else:  # two terms: tokens per decoding step must vary (e.g. the same steps at two batch sizes)
        per_step = cols[1] / np.maximum(cols[0], 1e-9)
        told_apart = bool(cols[0].min() > 0 and per_step.max() >= 1.5 * max(per_step.min(), 1e-9))
    if len(rows) < len(cols) or not told_apart:
        return None
    from scipy.optimize import nnls

    a = np.column_stack(cols)
    scale = a.max(axis=0)
    scale[scale == 0] = 1
    coef, _ = nnls(a / scale, rows[y].to_numpy(float))
    coef = coef / scale
    return tuple(float(c) for c in ([0.0] if not startup else []) + list(coef))


def _same_size(a: float, b: float) -> bool:
    return abs(a - b) <= 0.05 * max(a, b, 1e-9)


def _one_level(rows: pd.DataFrame, startup: float, y: str, shape: "Rate | None") -> tuple[float, float]:
    """(per_pass, per_token) of jobs at one work level, where steps and tokens cannot be told apart: in the
    proportion of ``shape`` (this size's generation fit: how a decoding step's cost splits on this machine), scaled
    to these jobs' time; without a shape, all per decoding step (small batches are bound per step)."""
    past = float((rows[y] - startup).clip(lower=0).sum())
    passes, work = float(rows["passes"].sum()), float(rows["work"].sum())
    if shape is not None and shape.per_pass * passes + shape.per_token * work > 0:
        k = past / (shape.per_pass * passes + shape.per_token * work)
        return k * shape.per_pass, k * shape.per_token
    return past / max(passes, 1), 0.0


def _fit_kind(rows: pd.DataFrame, startup_hint: float | None, shape: "Rate | None" = None
              ) -> tuple[tuple[float, float, float], str]:
    """(startup, per_pass, per_token) of one kind and size, and how it was fitted. Jobs whose log gives their
    working time (a training loop's ``train_runtime``, a generation job's :data:`GENERATION_LOG` lines) split it
    off: startup = the median of the rest, and the working time is fitted on decoding steps and tokens. Otherwise
    the whole time is fitted with a startup. Where the jobs do not vary enough to tell steps from tokens, see
    :func:`_one_level`."""
    n = len(rows)
    split = rows.dropna(subset=["loop_seconds"])
    if len(split):
        startup = float((split["seconds"] - split["loop_seconds"]).clip(lower=0).median())
        loop = _fit(split, "loop_seconds", startup=False)
        per_pass, per_token = loop[1:] if loop else _one_level(split, 0.0, "loop_seconds", shape)
        return (startup, per_pass, per_token), f"{len(split)} measured, split by their logs"
    fit = _fit(rows)
    if fit is None:  # a startup from elsewhere (the same process start and model load), else half the lightest job
        startup = startup_hint if startup_hint is not None else float(rows["seconds"].min()) / 2
        startup = min(startup, float(rows["seconds"].min()))
        fit = (startup, *_one_level(rows, startup, "seconds", shape))
    return fit, f"fit to {n} measured"


def fit_rates(measured: pd.DataFrame) -> dict[tuple[str, float], Rate]:
    """Measured rates by (kind or CPU rule, model size): training jobs, and generation jobs (score, verify,
    evaluate_base, evaluate: one fit per size), each by :func:`_fit_kind`; CPU rules their median seconds."""
    rates: dict[tuple[str, float], Rate] = {}
    if measured.empty:
        return rates
    for rule, rows in measured[measured["kind"] == CPU].groupby("rule"):
        rates[(rule, 0.0)] = Rate(float(rows["seconds"].median()), 0.0, 0.0, f"median of {len(rows)} measured",
                                  len(rows))
    train = measured[measured["kind"] == TRAIN].dropna(subset=["loop_seconds"])
    train_startup = {float(size): float((r["seconds"] - r["loop_seconds"]).clip(lower=0).median())
                     for size, r in train.groupby("size_b")}
    for size, rows in measured[measured["kind"] == GENERATE].groupby("size_b"):
        fit, how = _fit_kind(rows, train_startup.get(float(size)))
        rates[(GENERATE, float(size))] = Rate(*fit, how, len(rows))
    for size, rows in measured[measured["kind"] == TRAIN].groupby("size_b"):
        gen = rates.get((GENERATE, float(size)))
        split = rows.dropna(subset=["loop_seconds"])
        if gen is not None and len(split):
            fit, how = _fit_update(split, gen), f"{len(split)} measured, split by their logs"
        else:
            fit, how = _fit_kind(rows, gen.startup if gen else None, shape=gen)
        rates[(TRAIN, float(size))] = Rate(*fit, how, len(rows))
    return rates


def _fit_update(rows: pd.DataFrame, gen: Rate) -> tuple[float, float, float]:
    """(startup, per_pass, per_token) of GRPO training jobs whose logs split off their loop time: a GRPO step first
    decodes its completions, at the generation jobs' rates of the same model size (fitted on far more tokens, at
    larger batches), then updates the policy on them; the loop time left after the rollouts gives the update's cost
    per token. A fit of steps and tokens to the training loops alone extrapolates badly: the tiny calibration runs
    train 32-64 completions per step, where a CPU's cost per token is still falling with the batch."""
    startup = float((rows["seconds"] - rows["loop_seconds"]).clip(lower=0).median())
    rollout = gen.per_pass * rows["passes"] + gen.per_token * rows["work"]
    update = max(0.0, float((rows["loop_seconds"] - rollout).sum())) / max(float(rows["work"].sum()), 1.0)
    return startup, gen.per_pass, gen.per_token + update


def default_rate(job: Job, hw: Hardware = DEFAULTS) -> Rate:
    """The stated default of a job's kind, model size and batch on ``hw`` (:mod:`grpo_budget.hardware`:
    an A100, or the CPU on device cpu): each decoding step at the roofline of its batch; a GRPO step also trains on
    its completions."""
    if job.kind == CPU:
        return Rate(60.0 if job.rule == "prepare" else 30.0, 0.0, 0.0, "default")
    per_pass = hw.decode_step(job.size_b, max(job.batch, 1))
    per_token = 1 / hw.train_rate(job.size_b, job.checkpointing) if job.kind == TRAIN else 0.0
    return Rate(hw.startup(job.size_b), per_pass, per_token, hw.source)


def rate_for(job: Job, rates: dict[tuple[str, float], Rate], hw: Hardware = DEFAULTS) -> Rate:
    """A job's measured rate (its kind and model size), else the default on ``hw``."""
    if job.kind == CPU:
        return rates.get((job.rule, 0.0)) or default_rate(job, hw)
    for (kind, size), rate in rates.items():
        if kind == job.kind and _same_size(size, job.size_b):
            return rate
    return default_rate(job, hw)

"""The cost plan: every job's work, its estimated time, and the runtime a cluster job asks for.

Work is counted from the config and the plan's grid (:func:`grpo_budget.experiment.plan.grid`, ``training_runs``), never from a
job list of its own:

- generation (``score``, ``verify``, ``evaluate_base``, ``evaluate``): sequences = items x samples (x checkpoints),
  tokens generated = sequences x ``max_new_tokens`` (an upper bound: a completion may stop early);
- training (``train``): steps x ``prompts_per_step`` x ``num_generations`` completions of ``max_completion_length``
  tokens, each generated and then trained on.

Time = startup + per decoding step x sequential decoding steps + per token x tokens (:class:`Rate`). Rates come, first, from this project's own measurements: the ``benchmark:`` files
(``benchmarks/{rule}/*.tsv``, column ``s``) of earlier runs in the config's results folder and in
``cost.calibrate_from``, joined to each job's work through the ``plan/jobs.csv`` the plan wrote there, per stage
kind and model size. A training job's own log splits its time into the training loop (``train_runtime``) and the
startup around it. Where nothing was measured for a model size, :data:`DEFAULTS` give the rates of one A100 from
published figures (see their ``source``). A GPU rule's SLURM ``runtime`` is the estimate x ``cost.margin``, between
``cost.runtime_floor`` and ``cost.runtime_ceiling`` minutes.
"""

from __future__ import annotations

import json
import logging
import math
import re
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
from scipy.optimize import nnls

from grpo_budget.aggregate.run import OUTPUTS
from grpo_budget.experiment import plan, sweep
from grpo_budget.experiment.settings import Bootstrap, Cost
from grpo_budget.io import write_text
from grpo_budget.prepare import framearith
from grpo_budget.select.policies import budget_size
from grpo_budget.select.sources import split_arm
from grpo_budget.train.training import default_prompts_per_step, schedule

log = logging.getLogger(__name__)

GENERATE_RULES = ("score", "verify", "evaluate_base", "evaluate")
GPU_RULES = GENERATE_RULES + ("train",)
CPU_RULES = ("prepare", "bootstrap_model", "select", "summary", "table", "figure")
STAGES = {"prepare": "prepare", "bootstrap_model": "prepare", "score": "score", "verify": "score",
          "select": "select", "train": "train", "evaluate_base": "evaluate", "evaluate": "evaluate",
          "summary": "aggregate", "table": "aggregate", "figure": "aggregate"}
GENERATION_LOG = r"generated \d+ completions in ([0-9.]+) s"  # scoring.sample_and_grade's line in a job's log
JOBS_FILE = "plan/jobs.csv"  # per job: its work, so that a later plan can join this folder's benchmark files to it

# Log and benchmark names of the jobs that are not per arm (the rules' `benchmark:` lines; per-arm ones come from
# plan.run_name).
NAMES = {"score": "{model}_{dataset}", "verify": "{model}_{dataset}", "evaluate_base": "{model}_{evalset}"}


# ---------------------------------------------------------------------------------------------------------------
# Default rates: one A100-SXM4-80GB per GPU job, from published figures

@dataclass(frozen=True)
class Hardware:
    """The roofline of the default rates. A decoding step reads every weight once (memory-bound for small batches)
    and costs 2 FLOPs per parameter per sequence (compute-bound for large ones); training costs 6 FLOPs per
    parameter per token."""

    peak_flops: float = 312e12  # A100 dense BF16 tensor-core FLOP/s (NVIDIA A100 datasheet)
    memory_bw: float = 2.039e12  # A100-SXM4-80GB HBM2e bytes/s (NVIDIA A100 datasheet)
    memory_efficiency: float = 0.77  # share of memory bandwidth a batch-1 vLLM decode reaches: 75 tok/s for
    #   Llama-3.1-8B on an A100-40GB, "77% of the memory-bandwidth ceiling" (johnmusgrave.com, vLLM 0.23 sweep)
    generate_mfu: float = 0.2  # batched vLLM decoding at max_num_seqs: 4,100 tok/s at 7.6B and 2,100 at 14.8B
    #   under this model vs 3,363 (DeepSeek-R1-Distill-Qwen-7B) and 3,004 (-14B) tok/s measured on one A100-80GB
    #   with vLLM's defaults (morphllm.com/vllm-benchmarks): within 30%
    train_mfu: float = 0.3  # ours: forward + backward at 6 FLOPs/param/token (Kaplan et al. 2020) -- an upper
    #   bound for LoRA, which skips the base weights' gradients -- at 30% of peak
    concurrency: int = 256  # sequences decoded at once: vLLM's max_num_seqs default
    startup_s: float = 120.0  # ours: process start, CUDA/vLLM initialisation and graph capture
    load_s_per_b: float = 4.0  # ours: 2 GB of bf16 weights per billion parameters read at ~0.5 GB/s

    def startup(self, size_b: float) -> float:
        return self.startup_s + self.load_s_per_b * size_b

    def decode_step(self, size_b: float, batch: int) -> float:
        """Seconds of one decoding step of ``batch`` sequences."""
        params = max(size_b, 1e-3) * 1e9
        memory = 2 * params / (self.memory_bw * self.memory_efficiency)
        compute = 2 * params * batch / (self.peak_flops * self.generate_mfu)
        return max(memory, compute)

    def generate_rate(self, size_b: float, batch: int | None = None) -> float:
        """Tokens generated per second with ``batch`` sequences in flight (default: a full engine)."""
        batch = self.concurrency if batch is None else batch
        return batch / self.decode_step(size_b, batch)

    def train_rate(self, size_b: float) -> float:
        """Tokens trained on per second (forward and backward)."""
        return self.peak_flops * self.train_mfu / (6 * max(size_b, 1e-3) * 1e9)


DEFAULTS = Hardware()
DEFAULT_SOURCE = "default (A100)"


# ---------------------------------------------------------------------------------------------------------------
# Item counts: the prepared Parquet where it exists, else the config, else the benchmark's published size

# Split sizes of the benchmarks as the loaders build them (pool = train split, test = test split).
KNOWN_SIZES = {
    "gsm8k": {"pool": 7473, "test": 1319},  # openai/gsm8k main; pool counted from ../shared/data/gsm8k/train.jsonl
    "math": {"pool": 7498, "test": 5000},  # hendrycks MATH; 2 train items have no gradable gold answer (dropped)
    "aime2025": {"test": 30},  # AIME 2025 I and II, 15 problems each
}
# Share of a split a filter or tier keeps, measured on the pool files in ../shared/data (the test splits are
# assumed alike).
KNOWN_FRACTIONS = {
    ("math", "numeric", (True,)): 0.644,
    ("math", "level", (1, 2, 3)): 0.467,
    ("gsm8k", "n_steps", (1, 2, 3)): 0.637,
    ("aime2025", "part", ("AIME2025-I",)): 0.5,
}


ASSUMED_ITEMS = 1000  # a split whose size nothing tells


def _values(v) -> tuple:
    return tuple(v) if isinstance(v, list) else (v,)


def _fraction(ds: dict, column: str, values) -> float:
    return KNOWN_FRACTIONS.get((ds.get("benchmark", ds.get("generator")), column, _values(values)), 1.0)


def _parquet_rows(path: str) -> int | None:
    try:
        return pq.ParquetFile(path).metadata.num_rows
    except Exception:  # absent or unreadable: estimate from the config instead
        return None


def split_items(config: dict, dataset: str, split: str) -> int:
    """Items in a dataset's ``pool`` or ``test`` split."""
    rows = _parquet_rows(plan.paths(config["results"]).data.format(dataset=dataset, split=split))
    if rows is not None:
        return rows
    ds = config["datasets"][dataset]
    spec = ds.get("spec", {})
    key = f"{split}_size"
    n = ds.get(key, spec.get(key))
    if n is None:
        n = KNOWN_SIZES.get(ds.get("benchmark"), {}).get(split)
        if n is None:
            log.warning("cannot tell how many items dataset %r has in its %s split (set datasets.%s.spec.%s or "
                        "prepare it first): the cost plan assumes %d", dataset, split, dataset, key, ASSUMED_ITEMS)
            n = ASSUMED_ITEMS
        for column, values in (ds.get("filter") or {}).items():
            n = n * _fraction(ds, column, values)
    if spec.get("max_items"):
        n = min(n, spec["max_items"])
    return max(1, int(round(n)))


def subset_items(config: dict, run: dict) -> int:
    """Items a run's subset holds: its selected subset where it exists, else what its policy and budget buy."""
    rows = _parquet_rows(plan.paths(config["results"]).subset.format(**run))
    if rows is not None:
        return rows
    pool = split_items(config, run["dataset"], "pool")
    policy = split_arm(run["policy"])[0]
    if policy == "full":
        return pool
    if policy in ("tiers", "random_matched"):
        tiers = config["datasets"][run["dataset"]]["tiers"]
        return max(1, int(round(pool * _fraction(config["datasets"][run["dataset"]], tiers["column"], tiers["values"]))))
    return budget_size(plan.parse_budget(run["budget"]), pool, config["budget_rounding"])


def scoring_samples(config: dict) -> int:
    """Samples per pool item: ``scoring.num_samples``, or with adaptive scoring its ``max_samples``, or its total
    cap ``mean_samples`` where that is lower (an upper bound either way: most items settle sooner)."""
    sc = config["scoring"]
    adaptive = sc.get("adaptive")
    if adaptive is not None:
        cap = adaptive.get("mean_samples")
        return int(math.ceil(min(adaptive.get("max_samples", 32), cap if cap is not None else math.inf)))
    return int(sc["num_samples"])


def model_size_b(config: dict, model: str) -> float:
    """Billions of parameters: the config's ``size_b``, or a bootstrapped model's from its architecture."""
    spec = config["models"][model]
    if spec.get("size_b"):
        return float(spec["size_b"])
    if "bootstrap" in spec:
        b = Bootstrap.from_dict(spec["bootstrap"])
        h, i, n = b.hidden_size, b.intermediate_size, b.num_layers
        vocab = len(framearith.VOCAB) + 4
        return round((n * (4 * h * h + 3 * h * i) + vocab * h) / 1e9, 6)
    return 0.0


# ---------------------------------------------------------------------------------------------------------------
# Jobs and their work

@dataclass(frozen=True)
class Job:
    rule: str
    name: str  # its log and benchmark file name
    model: str = ""
    dataset: str = ""
    run: str = ""  # the arm it belongs to (train, evaluate), for the critical path
    size_b: float = 0.0
    sequences: int = 0  # completions generated
    gen_tokens: int = 0  # tokens generated, at most
    train_tokens: int = 0  # completion tokens trained on
    batch: int = 0  # sequences decoded at once
    passes: int = 0  # sequential decoding steps: batches one after another x tokens each
    steps: int = 0  # optimizer steps (train)
    train_log: str = ""  # its train_log.parquet, relative to the results folder (train)

    @property
    def stage(self) -> str:
        return STAGES[self.rule]

    @property
    def kind(self) -> str:
        return "train" if self.rule == "train" else "generate" if self.rule in GENERATE_RULES else "cpu"

    @property
    def work(self) -> int:
        return self.train_tokens if self.rule == "train" else self.gen_tokens


def _generation(config: dict, section: str, model: str, evalset: str | None) -> tuple[int, int, int]:
    """(samples per item, max new tokens, batch_size) of a generation job."""
    s = plan.generation_settings(config, section, model, evalset)
    samples = scoring_samples(config) if section == "scoring" else int(s["num_samples"])
    return samples, int(s["max_new_tokens"]), int(s["batch_size"])


def adaptive_rounds(config: dict) -> int:
    """Sampling rounds adaptive scoring may take at most (1 without it): ``first``, then ``step`` at a time up to
    ``max_samples``."""
    a = config["scoring"].get("adaptive")
    if a is None:
        return 1
    first, step, most = int(a.get("first", 2)), int(a.get("step", 2)), int(a.get("max_samples", 32))
    return 1 + max(0, math.ceil((most - first) / step))


def _gen_job(config: dict, rule: str, name: str, model: str, dataset: str, items: int, gen: tuple[int, int, int],
             rounds: int = 1, run: str = "", sampling_rounds: int = 1) -> Job:
    """A generation job over ``items`` prompts, ``rounds`` times (checkpoints). The transformers backend decodes
    ``batch_size // samples`` prompts at a time (``batch_size`` counts sequences); vLLM keeps its engine full
    (:attr:`Hardware.concurrency` sequences). Adaptive scoring's ``sampling_rounds`` each may end in a part batch."""
    samples, tokens, batch_size = gen
    seqs = items * samples
    if config["backend"] == "vllm":
        batch = min(seqs, DEFAULTS.concurrency)
        batches = math.ceil(seqs / batch)
    else:
        per_batch = max(1, batch_size // max(1, samples))
        batches = math.ceil(items / per_batch)
        batch = min(items, per_batch) * samples
    batches += sampling_rounds - 1
    return Job(rule, name, model, dataset, run, model_size_b(config, model), seqs * rounds, seqs * rounds * tokens,
               batch=batch, passes=batches * tokens * rounds)


def _verify_items(config: dict, model: str, dataset: str) -> int:
    """Distinct items the verification re-samples: the union of the subsets (seeded policies differ per seed)."""
    rows = {}
    for r in plan.grid(config):
        if (r["model"], r["dataset"]) != (model, dataset):
            continue
        seeded = split_arm(r["policy"])[0] in ("random", "random_matched")
        key = (r["policy"], r["budget"], r["seed"] if seeded else None)
        rows[key] = subset_items(config, r)
    return min(split_items(config, dataset, "pool"), sum(rows.values()))


def jobs(config: dict) -> list[Job]:
    """Every job of the workflow with its work, from the plan's grid (a validated config)."""
    out: list[Job] = []
    trainable = plan.trainable_datasets(config)
    for d in config["datasets"]:
        splits = ["test"] if config["datasets"][d]["eval_only"] else ["pool", "test"]
        out += [Job("prepare", f"{d}_{s}", dataset=d) for s in splits]
    scored, trained = plan.scored_models(config), plan.trained_models(config)
    used = [m for m in config["models"] if m in scored or m in trained]
    for m in used:
        spec = config["models"][m]
        if "bootstrap" in spec:
            out.append(Job("bootstrap_model", m, m, spec["bootstrap"]["dataset"], size_b=model_size_b(config, m)))
    for m in used:
        for d in trainable:
            if m in scored:
                out.append(_gen_job(config, "score", NAMES["score"].format(model=m, dataset=d), m, d,
                                    split_items(config, d, "pool"), _generation(config, "scoring", m, None),
                                    sampling_rounds=adaptive_rounds(config)))
            if plan.verifies(config) and m in trained:
                out.append(_gen_job(config, "verify", NAMES["verify"].format(model=m, dataset=d), m, d,
                                    _verify_items(config, m, d), _generation(config, "verify", m, None)))
        for e in sorted({e for d in trainable for e in plan.evalsets(config, d)} if m in trained else ()):
            out.append(_gen_job(config, "evaluate_base", NAMES["evaluate_base"].format(model=m, evalset=e), m, e,
                                split_items(config, e, "test"), _generation(config, "evaluation", m, e)))
    for r in plan.grid(config):
        out.append(Job("select", "{model}_{dataset}_{policy}_b{budget}_s{seed}".format(**r), r["model"], r["dataset"]))
    run_name = plan.run_name(config)
    relative = plan.paths(".", sweep.has_sweep(config)).train_log.removeprefix("./")
    for r in plan.training_runs(config):
        name = run_name.format(**r)
        s = plan.training_settings(config, r["model"], r.get("variant"))
        steps, saves = schedule(subset_items(config, r), s, default_prompts_per_step(s))
        seqs = steps * int(s["prompts_per_step"]) * int(s["num_generations"])
        length = int(s["max_completion_length"])
        out.append(Job("train", name, r["model"], r["dataset"], name, model_size_b(config, r["model"]), seqs,
                       seqs * length, seqs * length, batch=seqs // steps, passes=steps * length, steps=steps,
                       train_log=relative.format(**r)))
        for e in plan.evalsets(config, r["dataset"]):
            checkpoints = 1 if config["datasets"][e]["eval_only"] else len(saves)
            out.append(_gen_job(config, "evaluate", f"{name}_{e}", r["model"], e, split_items(config, e, "test"),
                                _generation(config, "evaluation", r["model"], e), rounds=checkpoints, run=name))
    built = [n for n, o in OUTPUTS.items() if (not o.needs_ood or plan.has_ood(config))
             and (o.wanted(config) if hasattr(o, "wanted") else True)]
    out.append(Job("summary", "summary"))
    out += [Job(OUTPUTS[n].kind, n) for n in built if OUTPUTS[n].kind in ("table", "figure")]
    return out


def benchmark_path(job: Job) -> str:
    """A job's benchmark file, relative to the results folder."""
    name = f"table_{job.name}" if job.rule == "table" else job.name
    rule = "aggregate" if job.stage == "aggregate" else job.rule
    return plan.PATTERNS["benchmark"].format(rule=rule, name=name)


def write_jobs(config: dict, job_list: list[Job] | None = None) -> Path | None:
    """``{results}/plan/jobs.csv``: every job's work and benchmark file, read back by later plans' calibration.
    At a workflow's start a plan that cannot be made only logs why (the jobs run as they would without it)."""
    if job_list is None:
        try:
            job_list = jobs(config)
        except Exception as e:  # never stop a workflow for its cost plan
            log.warning("no cost plan for this config (%s: %s); runtime requests are cost.runtime_ceiling",
                        type(e).__name__, e)
            return None
    frame = pd.DataFrame([dict(asdict(j), kind=j.kind, work=j.work, benchmark=benchmark_path(j))
                          for j in job_list])
    path = Path(config["results"]) / JOBS_FILE
    text = frame.to_csv(index=False)
    if not (path.exists() and path.read_text() == text):
        write_text(text, path)
    return path


# ---------------------------------------------------------------------------------------------------------------
# Rates from measurements

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

    def seconds(self, job: "Job") -> float:
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
            if job.rule == "train" and isinstance(job.train_log, str):
                loop = _train_loop_seconds(root / job.train_log)
            elif job.kind == "generate":
                loop = _generation_seconds(root / plan.PATTERNS["log"].format(rule=job.rule, name=job.name))
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
    for rule, rows in measured[measured["kind"] == "cpu"].groupby("rule"):
        rates[(rule, 0.0)] = Rate(float(rows["seconds"].median()), 0.0, 0.0, f"median of {len(rows)} measured",
                                  len(rows))
    train = measured[measured["kind"] == "train"].dropna(subset=["loop_seconds"])
    train_startup = {float(size): float((r["seconds"] - r["loop_seconds"]).clip(lower=0).median())
                     for size, r in train.groupby("size_b")}
    for size, rows in measured[measured["kind"] == "generate"].groupby("size_b"):
        fit, how = _fit_kind(rows, train_startup.get(float(size)))
        rates[("generate", float(size))] = Rate(*fit, how, len(rows))
    for size, rows in measured[measured["kind"] == "train"].groupby("size_b"):
        gen = rates.get(("generate", float(size)))
        split = rows.dropna(subset=["loop_seconds"])
        if gen is not None and len(split):
            fit, how = _fit_update(split, gen), f"{len(split)} measured, split by their logs"
        else:
            fit, how = _fit_kind(rows, gen.startup if gen else None, shape=gen)
        rates[("train", float(size))] = Rate(*fit, how, len(rows))
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


def default_rate(job: Job) -> Rate:
    """The stated default of a job's kind, model size and batch (:data:`DEFAULTS`): each decoding step at the
    roofline of its batch; a GRPO step also trains on its completions."""
    hw = DEFAULTS
    if job.kind == "cpu":
        return Rate(60.0 if job.rule == "prepare" else 30.0, 0.0, 0.0, "default")
    per_pass = hw.decode_step(job.size_b, max(job.batch, 1))
    per_token = 1 / hw.train_rate(job.size_b) if job.kind == "train" else 0.0
    return Rate(hw.startup(job.size_b), per_pass, per_token, DEFAULT_SOURCE)


def rate_for(job: Job, rates: dict[tuple[str, float], Rate]) -> Rate:
    if job.kind == "cpu":
        return rates.get((job.rule, 0.0)) or default_rate(job)
    for (kind, size), rate in rates.items():
        if kind == job.kind and _same_size(size, job.size_b):
            return rate
    return default_rate(job)


# ---------------------------------------------------------------------------------------------------------------
# The plan

def calibration_folders(config: dict) -> list[str]:
    """Results folders whose measurements count: the config's own and ``cost.calibrate_from``."""
    extra = list(config.get("cost", {}).get("calibrate_from", []))
    return list(dict.fromkeys([config["results"], *extra]))


def estimate(config: dict, folders: list[str] | None = None) -> pd.DataFrame:
    """Per job: rule, stage, work, estimated seconds and the source of its rate."""
    job_list = jobs(config)
    rates = fit_rates(measurements(calibration_folders(config) if folders is None else folders))
    rows = []
    for j in job_list:
        r = rate_for(j, rates)
        rows.append(dict(asdict(j), stage=j.stage, kind=j.kind, work=j.work, seconds=r.seconds(j),
                         source=r.source))
    return pd.DataFrame(rows)


def critical_path_s(est: pd.DataFrame) -> float:
    """The longest chain of dependent jobs: bootstrap, score, then per arm train and its slowest evaluation (or the
    verification), then the aggregates -- the wall time with a GPU for every job that can run."""
    def total(rule, **match):
        rows = est[est["rule"] == rule]
        for k, v in match.items():
            rows = rows[rows[k] == v]
        return float(rows["seconds"].max()) if len(rows) else 0.0

    boot = total("bootstrap_model")
    prep = total("prepare")
    longest = 0.0
    for (m, d), _ in est[est["rule"] == "score"].groupby(["model", "dataset"]):
        score = total("score", model=m, dataset=d) + total("select")
        arms = est[(est["rule"] == "train") & (est["model"] == m) & (est["dataset"] == d)]
        arm = max([row.seconds + total("evaluate", run=row.run) for row in arms.itertuples()], default=0.0)
        longest = max(longest, score + max(arm, total("verify", model=m, dataset=d)))
    aggregate = total("summary") + total("table") + total("figure")
    return prep + boot + longest + aggregate


def summarize(est: pd.DataFrame) -> pd.DataFrame:
    """Per rule: jobs, tokens generated and trained, GPU-hours, mean and longest job, rate source."""
    rows = []
    order = list(STAGES)
    for rule in sorted(est["rule"].unique(), key=order.index):
        r = est[est["rule"] == rule]
        gpu = rule in GPU_RULES
        rows.append({
            "stage": STAGES[rule], "rule": rule, "jobs": len(r),
            "tokens_generated": int(r["gen_tokens"].sum()), "tokens_trained": int(r["train_tokens"].sum()),
            "gpu_hours": float(r["seconds"].sum() / 3600) if gpu else 0.0,
            "job_hours": float(r["seconds"].sum() / 3600),
            "mean_job_min": float(r["seconds"].mean() / 60), "max_job_min": float(r["seconds"].max() / 60),
            "rate_source": "; ".join(sorted(set(r["source"]))),
        })
    return pd.DataFrame(rows)


def _fmt_tokens(n: int) -> str:
    for unit, div in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= div:
            return f"{n / div:.1f}{unit}"
    return str(n) if n else "–"


def _fmt_hours(h: float) -> str:
    return f"{h:.2f}" if h < 10 else f"{h:.0f}"


def render(summary: pd.DataFrame, est: pd.DataFrame, parallel: int | None = None) -> str:
    """The plan as a Markdown table with totals and wall-time lines."""
    lines = ["| stage | rule | jobs | tokens generated | tokens trained | GPU-h | mean job (min) | longest job (min) | rates |",
             "|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for r in summary.itertuples():
        lines.append(f"| {r.stage} | {r.rule} | {r.jobs} | {_fmt_tokens(r.tokens_generated)} | "
                     f"{_fmt_tokens(r.tokens_trained)} | {_fmt_hours(r.gpu_hours) if r.gpu_hours else '–'} | "
                     f"{r.mean_job_min:.1f} | {r.max_job_min:.1f} | {r.rate_source} |")
    gpu_h = summary["gpu_hours"].sum()
    all_h = summary["job_hours"].sum()
    lines.append(f"| **total** | | **{summary['jobs'].sum()}** | **{_fmt_tokens(int(summary['tokens_generated'].sum()))}** | "
                 f"**{_fmt_tokens(int(summary['tokens_trained'].sum()))}** | **{_fmt_hours(gpu_h)}** | | | |")
    crit = critical_path_s(est) / 3600
    top = summary.sort_values("gpu_hours", ascending=False).iloc[0]
    lines += ["", f"GPU-hours {gpu_h:.2f} (all jobs {all_h:.2f} h); {top['rule']} dominates "
                  f"({100 * top['gpu_hours'] / gpu_h if gpu_h else 0:.0f}%)." if gpu_h else
              f"Job time {all_h:.2f} h.",
              f"Wall time: at least {crit:.2f} h (the critical path, with a GPU for every job that can run)"
              + (f"; with {parallel} jobs at a time about {max(crit, all_h / parallel):.2f} h." if parallel else ".")]
    return "\n".join(lines) + "\n"


def write_plan(config: dict, parallel: int | None = None, folders: list[str] | None = None) -> tuple[str, Path]:
    """Estimate, write ``plan/cost.md`` and ``plan/cost.csv`` (per job) and ``plan/jobs.csv`` under the results
    folder; returns the Markdown and its path."""
    est = estimate(config, folders)
    summary = summarize(est)
    text = render(summary, est, parallel)
    root = Path(config["results"]) / "plan"
    write_jobs(config)
    write_text(est.to_csv(index=False), root / "cost.csv")
    write_text(text, root / "cost.md")
    return text, root / "cost.md"


# ---------------------------------------------------------------------------------------------------------------
# Runtime requests of the GPU rules

@lru_cache(maxsize=8)
def _cached(key: str) -> dict[tuple[str, str], float]:
    """Every job's estimated seconds by (rule, name), once per config in a Snakemake process."""
    try:
        est = estimate(json.loads(key))
    except Exception as e:  # never stop a workflow for its cost plan: the ceiling is safe
        log.warning("no cost estimate (%s: %s); runtime requests are cost.runtime_ceiling", type(e).__name__, e)
        return {}
    return {(r.rule, r.name): r.seconds for r in est.itertuples()}


def runtime_minutes(config: dict, rule: str, wildcards: dict) -> int:
    """The SLURM runtime (minutes) a GPU job asks for: its estimate x ``cost.margin``, within
    [``cost.runtime_floor``, ``cost.runtime_ceiling``]."""

    seconds = _cached(json.dumps(config, sort_keys=True, default=str))
    c = Cost.from_dict(config.get("cost"))
    estimate_s = seconds.get((rule, job_name(config, rule, wildcards)))
    if estimate_s is None:  # a job outside the plan (a target named by hand): the ceiling is safe
        return c.runtime_ceiling
    return request_minutes(estimate_s, c)


def request_minutes(seconds: float, c) -> int:
    """``seconds`` x ``c.margin`` in whole minutes, between ``c.runtime_floor`` and ``c.runtime_ceiling``."""
    return int(min(max(math.ceil(seconds * c.margin / 60), c.runtime_floor), c.runtime_ceiling))


def job_name(config: dict, rule: str, wildcards: dict) -> str:
    if rule in NAMES:
        return NAMES[rule].format(**wildcards)
    name = plan.run_name(config).format(**wildcards)
    return f"{name}_{wildcards['evalset']}" if rule == "evaluate" else name


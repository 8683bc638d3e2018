"""What each job of the workflow does, counted from the workflow's one job list
(:func:`grpo_budget.cluster.jobs.every_job`) and each job's settings from its builder: items, sequences generated,
tokens generated and trained on, sequential decoding steps.

- generation (``score``, ``verify``, ``evaluate_base``, ``evaluate``, ``drift``): sequences = items x samples (x
  checkpoints), tokens generated = sequences x ``max_new_tokens`` (an upper bound: a completion may stop early); a
  ``drift`` job scores its arm's subset as the ``score`` job scored the pool;
- training (``train``): steps x the rollouts a step of the run's method generates and trains on
  (:data:`grpo_budget.train.methods.METHODS`: ``prompts_per_step`` x ``num_generations``, and what the method
  adds), of ``max_completion_length`` tokens each.
"""

from __future__ import annotations

import logging
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from grpo_budget.hardware import DEFAULTS
from grpo_budget.cluster.jobs import JobSettings, every_job, job_settings
from grpo_budget.config.settings import Adaptive, Bootstrap
from grpo_budget.experiment import plan, sweep
from grpo_budget.experiment.rules import GENERATE, RULES, TRAIN, job_name, log_folder
from grpo_budget.io import write_text
from grpo_budget.prepare import framearith
from grpo_budget.prepare.counts import local_sizes
from grpo_budget.select.policies import POLICIES, Pool, budget_size, policy_of
from grpo_budget.select.sources import split_arm
from grpo_budget.train.methods import method_of
from grpo_budget.train.schedule import default_prompts_per_step, schedule
from grpo_budget.train.tinymodel import BOS, EOS, PAD, UNK

log = logging.getLogger(__name__)

JOBS_FILE = "plan/jobs.csv"  # per job: its work, so that a later plan can join this folder's benchmark files to it

# ---------------------------------------------------------------------------------------------------------------
# Item counts: the prepared Parquet where it exists, else the config, else the benchmark's published size

# Split sizes of the benchmarks as the loaders build them (pool = train split, test = test split).
KNOWN_SIZES = {
    "gsm8k": {"pool": 7473, "test": 1319},  # openai/gsm8k main; pool counted from ../shared/data/gsm8k/train.jsonl
    "math": {"pool": 7497, "test": 5000},  # hendrycks MATH; 2 train items lack a gradable gold, 1 repeats (dropped)
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


WARNED: set[tuple[str, str]] = set()  # (dataset, split) whose size was assumed: said once per process


def split_items(config: dict, dataset: str, split: str) -> int:
    """Items in a dataset's ``pool`` or ``test`` split: the prepared table's, else the rows of its local files
    (prepared here as the job would), else the config's sizes, else the benchmark's published size."""
    rows = _parquet_rows(plan.paths(config["results"]).data.format(dataset=dataset, split=split))
    if rows is not None:
        return rows
    ds = config["datasets"][dataset]
    counted = local_sizes(ds)
    if counted is not None and split in counted:
        return max(1, counted[split])
    spec = ds.get("spec", {})
    key = f"{split}_size"
    n = ds.get(key, spec.get(key))
    if n is None:
        n = KNOWN_SIZES.get(ds.get("benchmark"), {}).get(split)
        if n is None:
            if (dataset, split) not in WARNED:
                WARNED.add((dataset, split))
                log.warning("cannot tell how many items dataset %r has in its %s split (prepare it first: snakemake "
                            "--configfile CONFIG %s; or cap it with datasets.%s.spec.max_items): the cost plan "
                            "assumes %d", dataset, split, plan.paths(config["results"]).data.format(
                                dataset=dataset, split=split), dataset, ASSUMED_ITEMS)
            n = ASSUMED_ITEMS
        for column, values in (ds.get("filter") or {}).items():
            n = n * _fraction(ds, column, values)
    if spec.get("max_items"):
        n = min(n, spec["max_items"])
    return max(1, int(round(n)))


def _stand_in_pool(ds: dict, n: int) -> Pool:
    """A pool of ``n`` items of which the dataset's tiers hold their known share (at least one), to ask a policy
    that sets its own size how many items it takes."""
    tiers = ds.get("tiers")
    if not tiers:
        return Pool(pd.DataFrame(index=range(n)), np.arange(n), 0, None)
    inside = max(1, int(round(n * _fraction(ds, tiers["column"], tiers["values"]))))
    column = [_values(tiers["values"])[0]] * inside + [None] * (n - inside)
    return Pool(pd.DataFrame({tiers["column"]: column}), np.arange(n), 0, tiers)


def subset_items(config: dict, run: dict) -> int:
    """Items a run's subset holds: its selected subset where it exists, else what its policy and budget buy."""
    rows = _parquet_rows(plan.paths(config["results"]).subset.format(**run))
    if rows is not None:
        return rows
    pool = split_items(config, run["dataset"], "pool")
    policy = policy_of(run["policy"])
    if policy.size is not None:
        return policy.size(_stand_in_pool(config["datasets"][run["dataset"]], pool))
    return budget_size(plan.parse_budget(run["budget"]), pool, config["budget_rounding"])


def scoring_samples(config: dict) -> int:
    """Samples per pool item: ``scoring.num_samples``, or with adaptive scoring its ``max_samples``, or its total
    ``mean_samples`` where that is lower (an upper bound either way: without ``mean_samples`` most items settle
    sooner; with it, scoring spends it unless no item has doubt left)."""
    sc = config["scoring"]
    if sc.get("adaptive") is not None:
        a = Adaptive.from_dict(sc["adaptive"])
        return int(math.ceil(min(a.max_samples, a.mean_samples if a.mean_samples is not None else math.inf)))
    return int(sc["num_samples"])


def model_size_b(config: dict, model: str) -> float:
    """Billions of parameters: the config's ``size_b``, or a bootstrapped model's from its architecture."""
    spec = config["models"][model]
    if spec.get("size_b"):
        return float(spec["size_b"])
    if "bootstrap" in spec:
        b = Bootstrap.from_dict(spec["bootstrap"])
        h, i, n = b.hidden_size, b.intermediate_size, b.num_layers
        vocab = len(framearith.VOCAB) + len((PAD, EOS, BOS, UNK))  # the tiny model's tokenizer
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
    checkpointing: bool = False  # gradient checkpointing, as the memory plan resolves it (train)

    @property
    def stage(self) -> str:
        return RULES[self.rule].stage

    @property
    def kind(self) -> str:
        return RULES[self.rule].kind

    @property
    def work(self) -> int:
        return self.train_tokens if self.kind == TRAIN else self.gen_tokens


def adaptive_rounds(config: dict) -> int:
    """Sampling rounds adaptive scoring may take at most (1 without it): ``first``, then ``step`` at a time up to
    ``max_samples``."""
    if config["scoring"].get("adaptive") is None:
        return 1
    a = Adaptive.from_dict(config["scoring"]["adaptive"])
    return 1 + max(0, math.ceil((int(a.max_samples) - int(a.first)) / int(a.step)))


def _gen_job(config: dict, rule: str, name: str, model: str, dataset: str, items: int, gen: tuple[int, int, int],
             rounds: int = 1, run: str = "", sampling_rounds: int = 1) -> Job:
    """A generation job over ``items`` prompts, ``rounds`` times (checkpoints). The transformers backend decodes
    ``batch_size // samples`` prompts at a time (``batch_size`` counts sequences); vLLM keeps its engine full
    (:attr:`grpo_budget.hardware.Hardware.concurrency` sequences). Adaptive scoring's ``sampling_rounds`` each may end in a part batch."""
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
        key = (r["policy"], r["budget"], r["seed"] if POLICIES[split_arm(r["policy"])[0]].seeded else None)
        rows[key] = subset_items(config, r)
    return min(split_items(config, dataset, "pool"), sum(rows.values()))


def jobs(config: dict) -> list[Job]:
    """Every job of the workflow (:func:`grpo_budget.cluster.jobs.every_job`) with its work."""
    out: list[Job] = []
    settings: dict[tuple, JobSettings] = {}  # by what a job's settings depend on
    saves: dict[str, int] = {}  # a training job's name -> its checkpoints, each of which its evaluations evaluate

    def job_of(rule: str, wc: dict) -> JobSettings:
        key = (rule, wc["model"], wc.get("variant"), wc.get("evalset"))
        if key not in settings:
            settings[key] = job_settings(config, rule, wc)
        return settings[key]

    relative = plan.paths(".", sweep.has_sweep(config)).train_log.removeprefix("./")
    for rule, wc in every_job(config):
        name = job_name(config, rule, wc)
        if rule == "prepare":
            out.append(Job(rule, name, dataset=wc["dataset"]))
        elif rule in ("bootstrap_model", "convert_gguf"):
            m = wc["model"]
            boot = config["models"][m].get("bootstrap")
            out.append(Job(rule, name, m, boot["dataset"] if boot else "", size_b=model_size_b(config, m)))
        elif rule == "select":
            out.append(Job(rule, name, wc["model"], wc["dataset"]))
        elif rule == "train":
            job = job_of(rule, wc)
            t = job.training
            steps, planned = schedule(subset_items(config, wc), t, default_prompts_per_step(t))
            saves[name] = len(planned)
            method, length = method_of(t), int(t.max_completion_length)
            generated, trained = steps * method.generations_per_step(t), steps * method.rows_per_step(t)
            out.append(Job(rule, name, wc["model"], wc["dataset"], name, model_size_b(config, wc["model"]), generated,
                           generated * length, trained * length, batch=generated // steps, passes=steps * length,
                           steps=steps, train_log=relative.format(**wc),
                           checkpointing=bool(job.settings["gradient_checkpointing"])))
        elif RULES[rule].kind == GENERATE:
            out.append(_generation_job(config, rule, name, wc, job_of(rule, wc), saves))
        else:  # the aggregate jobs
            out.append(Job(rule, name))
    return out


def _generation_job(config: dict, rule: str, name: str, wc: dict, job: JobSettings, saves: dict[str, int]) -> Job:
    """A scoring, verification, evaluation or drift job with its work: the items it samples, its sampling, and for
    an arm's evaluation the checkpoints it evaluates (an evaluation-only set: the final one)."""
    m = wc["model"]
    # the pool's scoring and its replay on a subset draw what adaptive scoring draws; the others a fixed count
    gen = (scoring_samples(config) if rule in ("score", "drift") else int(job.settings["num_samples"]),
           int(job.settings["max_new_tokens"]), int(job.settings["batch_size"]))
    if rule == "score":
        return _gen_job(config, rule, name, m, wc["dataset"], split_items(config, wc["dataset"], "pool"), gen,
                        sampling_rounds=adaptive_rounds(config))
    if rule == "verify":
        return _gen_job(config, rule, name, m, wc["dataset"], _verify_items(config, m, wc["dataset"]), gen)
    if rule == "drift":  # the subset scored again, as the pool was (analysis.drift)
        return _gen_job(config, rule, name, m, wc["dataset"], subset_items(config, wc), gen,
                        run=job_name(config, "train", wc), sampling_rounds=adaptive_rounds(config))
    e = wc["evalset"]
    if rule == "evaluate_base":
        return _gen_job(config, rule, name, m, e, split_items(config, e, "test"), gen)
    run = job_name(config, "train", wc)
    rounds = 1 if config["datasets"][e]["eval_only"] else saves[run]
    return _gen_job(config, rule, name, m, e, split_items(config, e, "test"), gen, rounds=rounds, run=run)


def benchmark_path(job: Job) -> str:
    """A job's benchmark file, relative to the results folder."""
    return plan.PATTERNS["benchmark"].format(rule=log_folder(job.rule), name=job.name)


def log_path(rule: str, name: str) -> str:
    """The log file of the job ``name`` of ``rule``, relative to the results folder."""
    return plan.PATTERNS["log"].format(rule=log_folder(rule), name=name)


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

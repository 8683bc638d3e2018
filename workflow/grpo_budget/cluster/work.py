"""What each job of the workflow does, counted from the config and the plan's grid (never from a job list of its
own): items, sequences generated, tokens generated and trained on, sequential decoding steps.

- generation (``score``, ``verify``, ``evaluate_base``, ``evaluate``, ``drift``): sequences = items x samples (x
  checkpoints), tokens generated = sequences x ``max_new_tokens`` (an upper bound: a completion may stop early); a
  ``drift`` job scores its arm's subset as the ``score`` job scored the pool;
- training (``train``): steps x ``prompts_per_step`` x ``num_generations`` completions of ``max_completion_length``
  tokens, each generated and then trained on.
"""

from __future__ import annotations

import logging
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from grpo_budget.aggregate.run import OUTPUTS
from grpo_budget.cluster.hardware import DEFAULTS
from grpo_budget.cluster.memory_plan import job_training
from grpo_budget.cluster.rules import RULES, TRAIN, job_name, log_folder
from grpo_budget.experiment import plan, sweep
from grpo_budget.experiment.settings import Adaptive, Bootstrap, Training
from grpo_budget.io import write_text
from grpo_budget.prepare import framearith
from grpo_budget.prepare.counts import local_sizes
from grpo_budget.select.policies import POLICIES, Pool, budget_size, policy_of
from grpo_budget.select.sources import split_arm
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


def _generation(config: dict, section: str, model: str, evalset: str | None) -> tuple[int, int, int]:
    """(samples per item, max new tokens, batch_size) of a generation job."""
    s = plan.generation_settings(config, section, model, evalset)
    samples = scoring_samples(config) if section == "scoring" else int(s["num_samples"])
    return samples, int(s["max_new_tokens"]), int(s["batch_size"])


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
    (:attr:`grpo_budget.cluster.hardware.Hardware.concurrency` sequences). Adaptive scoring's ``sampling_rounds`` each may end in a part batch."""
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
    """Every job of the workflow with its work, from the plan's grid (a validated config)."""
    out: list[Job] = []
    trainable = plan.trainable_datasets(config)
    for d in config["datasets"]:
        splits = ["test"] if config["datasets"][d]["eval_only"] else ["pool", "test"]
        out += [Job("prepare", job_name(config, "prepare", dict(dataset=d, split=s)), dataset=d) for s in splits]
    scored, trained = plan.scored_models(config), plan.trained_models(config)
    used = [m for m in config["models"] if m in scored or m in trained]
    for m in used:
        spec = config["models"][m]
        if "bootstrap" in spec:
            out.append(Job("bootstrap_model", job_name(config, "bootstrap_model", dict(model=m)), m,
                           spec["bootstrap"]["dataset"], size_b=model_size_b(config, m)))
        if "gguf" in spec:
            out.append(Job("convert_gguf", job_name(config, "convert_gguf", dict(model=m)), m,
                           size_b=model_size_b(config, m)))
    for m in used:
        for d in trainable:
            if m in scored:
                out.append(_gen_job(config, "score", job_name(config, "score", dict(model=m, dataset=d)), m, d,
                                    split_items(config, d, "pool"), _generation(config, "scoring", m, None),
                                    sampling_rounds=adaptive_rounds(config)))
            if plan.verifies(config) and m in trained:
                out.append(_gen_job(config, "verify", job_name(config, "verify", dict(model=m, dataset=d)), m, d,
                                    _verify_items(config, m, d), _generation(config, "verify", m, None)))
        for e in sorted({e for d in trainable for e in plan.evalsets(config, d)} if m in trained else ()):
            out.append(_gen_job(config, "evaluate_base", job_name(config, "evaluate_base", dict(model=m, evalset=e)),
                                m, e, split_items(config, e, "test"), _generation(config, "evaluation", m, e)))
    for r in plan.grid(config):
        out.append(Job("select", job_name(config, "select", r), r["model"], r["dataset"]))
    relative = plan.paths(".", sweep.has_sweep(config)).train_log.removeprefix("./")
    resolved: dict[tuple, bool] = {}
    for r in plan.training_runs(config):
        name = job_name(config, "train", r)
        settings = plan.training_settings(config, r["model"], r.get("variant"))
        t = Training.from_dict(settings)
        key = (r["model"], r.get("variant"))
        if key not in resolved:  # the memory plan's resolution of gradient_checkpointing: auto
            resolved[key] = bool(job_training(config, r["model"], settings)["gradient_checkpointing"])
        steps, saves = schedule(subset_items(config, r), t, default_prompts_per_step(t))
        seqs = steps * int(t.prompts_per_step) * int(t.num_generations)
        length = int(t.max_completion_length)
        out.append(Job("train", name, r["model"], r["dataset"], name, model_size_b(config, r["model"]), seqs,
                       seqs * length, seqs * length, batch=seqs // steps, passes=steps * length, steps=steps,
                       train_log=relative.format(**r), checkpointing=resolved[key]))
        for e in plan.evalsets(config, r["dataset"]):
            checkpoints = 1 if config["datasets"][e]["eval_only"] else len(saves)
            out.append(_gen_job(config, "evaluate", job_name(config, "evaluate", dict(r, evalset=e)), r["model"], e,
                                split_items(config, e, "test"), _generation(config, "evaluation", r["model"], e),
                                rounds=checkpoints, run=name))
        if r["model"] in plan.drift_models(config):  # the subset scored again, as the pool was (analysis.drift)
            out.append(_gen_job(config, "drift", job_name(config, "drift", r), r["model"], r["dataset"],
                                subset_items(config, r), _generation(config, "scoring", r["model"], None), run=name,
                                sampling_rounds=adaptive_rounds(config)))
    built = [n for n, o in OUTPUTS.items() if (not o.needs_ood or plan.has_ood(config))
             and (o.wanted(config) if hasattr(o, "wanted") else True)]
    out.append(Job("summary", job_name(config, "summary", {})))
    # An aggregate output's kind is the rule that builds it.
    out += [Job(OUTPUTS[n].kind, job_name(config, OUTPUTS[n].kind, dict(name=n))) for n in built
            if OUTPUTS[n].kind != "summary"]
    return out


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

# Validation, path patterns (the one place each is defined), wildcard constraints and input functions.

import json

from snakemake.exceptions import WorkflowError
from snakemake.utils import min_version

from grpo_budget import config as grpo_config
from grpo_budget.selection import FULL_LABEL, POLICIES

min_version("9.0")

try:
    grpo_config.validate(config)  # fills in defaults; refuses a bad config before any job starts
except grpo_config.ConfigError as e:
    raise WorkflowError(f"invalid configuration: {e}") from None


R = config["results"]
DATA = R + "/data/{dataset}/{split}.parquet"
MODEL = R + "/models/{model}"
SCORES = R + "/scores/{model}/{dataset}.parquet"
RUN = R + "/runs/{model}/{dataset}/{policy}/b{budget}/s{seed}"
SUBSET = RUN + "/subset.parquet"
CHECKPOINTS = RUN + "/checkpoints"  # not a rule output: Snakemake would delete it before a re-run
TRAIN_LOG = RUN + "/train_log.parquet"
MANIFEST = RUN + "/manifest.json"
RUN_EVAL = RUN + "/eval/{evalset}.parquet"
BASE_EVAL = R + "/base/{model}/{evalset}.parquet"
SUMMARY_CSV = R + "/summary.csv"
SUMMARY_MD = R + "/summary.md"
FIGURE = R + "/figures/{name}.png"
FIGURES = ["accuracy_vs_checkpoint", "learnable_vs_step", "pass_rate_histogram"]
LOGS = R + "/logs"
BENCHMARKS = R + "/benchmarks"

NAME = r"[A-Za-z0-9][A-Za-z0-9_.-]*"


wildcard_constraints:
    model=NAME,
    dataset=NAME,
    evalset=NAME,
    split="pool|test",
    policy="|".join(POLICIES),
    budget=FULL_LABEL + r"|\d+|\d*\.\d+(e-?\d+)?",
    seed=r"\d+",
    name="|".join(FIGURES),


def budget_labels(policy):
    if policy == "full":
        return [FULL_LABEL]
    return [grpo_config.budget_label(b) for b in config["budgets"]]


def trainable_datasets():
    return [n for n, d in config["datasets"].items() if not d["eval_only"]]


def evalsets(dataset):
    """Test sets an arm trained on ``dataset`` is evaluated on: its own, then its out-of-distribution sets."""
    return [dataset] + list(config["datasets"][dataset]["ood"])


def grid():
    """Every (model, dataset, policy, budget, seed) run of the experiment."""
    return [
        dict(model=m, dataset=d, policy=p, budget=b, seed=s)
        for m in config["models"]
        for d in trainable_datasets()
        for p in config["policies"]
        for b in budget_labels(p)
        for s in config["seeds"]
    ]


def model_path(model):
    """Where a model is loaded from: the bootstrapped folder, or the configured hub id / path."""
    spec = config["models"][model]
    return MODEL.format(model=model) if "bootstrap" in spec else spec["path"]


def model_input(wildcards):
    return [model_path(wildcards.model)] if "bootstrap" in config["models"][wildcards.model] else []


def as_json(obj):
    return json.dumps(obj, sort_keys=True)


def dataset_json(name):
    return as_json(config["datasets"][name])


def gen_settings(section, model, **overrides):
    """A scoring/evaluation section plus the model's generation settings, as the CLI's --settings."""
    spec = config["models"][model]
    settings = dict(config[section], backend=config["backend"], **overrides)
    if "chat_template_kwargs" in spec:
        settings["chat_template_kwargs"] = spec["chat_template_kwargs"]
    if config["backend"] == "vllm":
        settings["max_lora_rank"] = config["training"]["lora"]["r"]
    return as_json(settings)


def runs_listing():
    """Every file the aggregate stage reads, as JSON for `grpo-budget aggregate --runs`."""
    runs = []
    for r in grid():
        run = {k: (str(v) if k != "seed" else v) for k, v in r.items()}
        run.update(
            subset=SUBSET.format(**r),
            log=TRAIN_LOG.format(**r),
            manifest=MANIFEST.format(**r),
            evals={e: RUN_EVAL.format(**r, evalset=e) for e in evalsets(r["dataset"])},
        )
        runs.append(run)
    base = [
        dict(model=m, evalset=e, eval=BASE_EVAL.format(model=m, evalset=e))
        for m in config["models"]
        for e in sorted({e for d in trainable_datasets() for e in evalsets(d)})
    ]
    scores = [
        dict(model=m, dataset=d, path=SCORES.format(model=m, dataset=d))
        for m in config["models"]
        for d in trainable_datasets()
    ]
    return dict(runs=runs, base=base, scores=scores, num_generations=config["training"]["num_generations"])


def listing_files(what):
    """The files of the runs listing that one aggregate output reads."""
    listing = runs_listing()
    files = []
    if what in ("summary", "accuracy_vs_checkpoint"):
        files += [b["eval"] for b in listing["base"]]
        files += [p for r in listing["runs"] for p in r["evals"].values()]
    if what in ("summary", "learnable_vs_step"):
        files += [r["log"] for r in listing["runs"]]
    if what in ("summary", "learnable_vs_step", "pass_rate_histogram"):
        files += [r["subset"] for r in listing["runs"]]
    if what == "pass_rate_histogram":
        files += [s["path"] for s in listing["scores"]]
    return files


def final_targets():
    return [SUMMARY_CSV, SUMMARY_MD] + expand(FIGURE, name=FIGURES)

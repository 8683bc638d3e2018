# Validation, path patterns (the one place each is defined), wildcard constraints and input functions.

import json
import os
import sys

from snakemake.exceptions import WorkflowError
from snakemake.utils import min_version

from grpo_budget import config as grpo_config
from grpo_budget.selection import FIXED_SIZE, FULL_LABEL, POLICIES

min_version("9.0")


# Jobs call the `grpo-budget` script of the environment Snakemake runs in, activated or not.
os.environ.update(PATH=os.pathsep.join([os.path.dirname(sys.executable), os.getenv("PATH", "")]))

try:
    grpo_config.validate(config)  # fills in defaults; refuses a bad config before any job starts
except grpo_config.ConfigError as e:
    raise WorkflowError(f"invalid configuration: {e}") from None


R = config["results"]


def results(path):
    """A path under the configured results folder."""
    return f"{R}/{path}"


RUN_DIR = "runs/{model}/{dataset}/{policy}/b{budget}/s{seed}"
DATA = results("data/{dataset}/{split}.parquet")
MODEL = results("models/{model}")
SCORES = results("scores/{model}/{dataset}.parquet")
SUBSET = results(f"{RUN_DIR}/subset.parquet")
CHECKPOINTS = results(f"{RUN_DIR}/checkpoints")  # never an output, since Snakemake deletes outputs before it re-runs a job
TRAIN_LOG = results(f"{RUN_DIR}/train_log.parquet")
MANIFEST = results(f"{RUN_DIR}/manifest.json")
RUN_EVAL = results(f"{RUN_DIR}/eval/{{evalset}}.parquet")
BASE_EVAL = results("base/{model}/{evalset}.parquet")
# Aggregate outputs: each figure (PNG and PDF) and each table (CSV per seed; Markdown and HTML per arm) is its own job.
SUMMARY_CSV = results("summary.csv")
SUMMARY_MD = results("summary.md")
SUMMARY_SEEDS = results("tables/gains_over_seeds.csv")
SUMMARY_HTML = results("tables/summary.html")
FIGURE = results("figures/{name}.png")
FIGURE_PDF = results("figures/{name}.pdf")
FIGURES = ["accuracy_vs_checkpoint", "learnable_vs_step", "pass_rate_histogram", "accuracy_by_difficulty"]
TABLE = results("tables/{table}.csv")
TABLE_MD = results("tables/{table}.md")
TABLE_HTML = results("tables/{table}.html")
TABLES = ["learnable", "difficulty", "ood"]


def log_file(rule, name):
    return results(f"logs/{rule}/{name}.log")


def benchmark_file(rule, name):
    return results(f"benchmarks/{rule}/{name}.tsv")


NAME = r"[A-Za-z0-9][A-Za-z0-9_.-]*"


# Cluster resources of the GPU rules, scaled to the model (config `models.NAME.size_b`, billions of parameters):
# one A100-80GB holds a bf16 model of up to ~14B with LoRA (2 GB of weights per billion, activations and vLLM's
# share on top). Runtime (minutes) and host memory (MB) = base + per_billion * size_b.
GPU_SCALING = {
    "score": {"runtime": (60, 15), "mem_mb": (16000, 4000)},
    "train": {"runtime": (240, 60), "mem_mb": (32000, 6000)},
    "evaluate": {"runtime": (60, 10), "mem_mb": (16000, 4000)},
}


def scaled(stage, resource):
    """A resource callable of a GPU rule, from the model's size."""
    base, per_billion = GPU_SCALING[stage][resource]
    return lambda wc: int(base + per_billion * config["models"][wc.model]["size_b"])


def budget_labels(policy):
    if policy in FIXED_SIZE:
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


def gen_settings(section, model, evalset=None):
    """A scoring/evaluation section plus the model's generation settings, as the CLI's --settings.

    Evaluation-only sets (e.g. AIME) take the ``ood_*`` sampling (pass@k with longer completions).
    """
    spec = config["models"][model]
    settings = dict(config[section], backend=config["backend"])
    if evalset and config["datasets"][evalset]["eval_only"]:
        for key in ("num_samples", "max_new_tokens"):
            settings[key] = settings.pop(f"ood_{key}", settings[key])
    settings = {k: v for k, v in settings.items() if not k.startswith("ood_")}
    if "chat_template_kwargs" in spec:
        settings["chat_template_kwargs"] = spec["chat_template_kwargs"]
    if config["backend"] == "vllm":
        settings["max_lora_rank"] = config["training"]["lora"]["r"]
    return as_json(settings)


def final_only(wildcards):
    """Evaluation-only sets are evaluated on the final adapter alone (they are expensive and out of distribution)."""
    return "--final-only" if config["datasets"][wildcards.evalset]["eval_only"] else ""


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
    every_evalset = sorted({e for d in trainable_datasets() for e in evalsets(d)})
    base = [
        dict(model=m, evalset=e, eval=BASE_EVAL.format(model=m, evalset=e))
        for m in config["models"]
        for e in every_evalset
    ]
    scores = [
        dict(model=m, dataset=d, path=SCORES.format(model=m, dataset=d))
        for m in config["models"]
        for d in trainable_datasets()
    ]
    return dict(
        runs=runs,
        base=base,
        scores=scores,
        tests={e: DATA.format(dataset=e, split="test") for e in every_evalset},
        num_generations=config["training"]["num_generations"],
        prompts_per_step=config["training"]["prompts_per_step"],
    )


def listing_files(what):
    """The files of the runs listing that one aggregate output reads (a FIGURES or TABLES name, or "summary")."""
    listing = runs_listing()
    runs = listing["runs"]
    if what == "ood":  # the out-of-distribution sets only
        ood = {(r["model"], e) for r in runs for e in r["evals"] if e != r["dataset"]}
        return [b["eval"] for b in listing["base"] if (b["model"], b["evalset"]) in ood] + [
            p for r in runs for e, p in r["evals"].items() if e != r["dataset"]
        ]
    files = []
    if what in ("summary", "accuracy_vs_checkpoint", "difficulty", "accuracy_by_difficulty"):
        files += [b["eval"] for b in listing["base"]]
        files += [p for r in runs for p in r["evals"].values()]
    if what in ("difficulty", "accuracy_by_difficulty"):
        files += list(listing["tests"].values())
    if what in ("summary", "learnable_vs_step", "learnable"):
        files += [r["log"] for r in runs]
    if what in ("summary", "learnable_vs_step", "pass_rate_histogram", "learnable"):
        files += [r["subset"] for r in runs]
    if what == "pass_rate_histogram":
        files += [s["path"] for s in listing["scores"]]
    return files


def final_targets():
    """Every aggregate output; the out-of-distribution table only when some dataset lists `ood` sets."""
    has_ood = any(config["datasets"][d]["ood"] for d in trainable_datasets())
    tables = [t for t in TABLES if t != "ood" or has_ood]
    return (
        [SUMMARY_CSV, SUMMARY_MD, SUMMARY_SEEDS, SUMMARY_HTML]
        + expand([FIGURE, FIGURE_PDF], name=FIGURES)
        + expand([TABLE, TABLE_MD, TABLE_HTML], table=tables)
    )

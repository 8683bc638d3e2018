"""Where each output of a run lies: every path pattern under a results folder, relative to it (the one place each
is defined). The ground floor: the plan, the rules and the stages that find a run's files all read them here."""

from __future__ import annotations

from types import SimpleNamespace

RUN_DIR = "runs/{model}/{dataset}/{policy}/b{budget}/s{seed}"
PATTERNS = {
    "data": "data/{dataset}/{split}.parquet",
    "model": "models/{model}",
    "scores": "scores/{model}/{dataset}.parquet",
    "subset": f"{RUN_DIR}/subset.parquet",
    "checkpoints": f"{RUN_DIR}/checkpoints",  # never an output: Snakemake deletes outputs before a re-run
    "train_log": f"{RUN_DIR}/train_log.parquet",
    "manifest": f"{RUN_DIR}/manifest.json",
    "run_eval": f"{RUN_DIR}/eval/{{evalset}}.parquet",
    "drift": f"{RUN_DIR}/drift.parquet",  # the subset scored again by the trained model (analysis.drift)
    "base_eval": "base/{model}/{evalset}.parquet",
    "verify": "verify/{model}/{dataset}.parquet",
    "listing": "plan/listing-{digest}.json",  # named by its content: a new plan never overwrites a running one
    "summary_csv": "summary.csv",
    "summary_md": "summary.md",
    "summary_seeds": "tables/gains_over_seeds.csv",
    "summary_html": "tables/summary.html",
    "summary_rst": "summary.rst",  # the answer, as the landing page of `snakemake --report`
    "figure": "figures/{name}.png",
    "figure_pdf": "figures/{name}.pdf",
    "table": "tables/{name}.csv",
    "table_md": "tables/{name}.md",
    "table_html": "tables/{name}.html",
    "log": "logs/{rule}/{name}.log",
    "benchmark": "benchmarks/{rule}/{name}.tsv",
    "provenance": "provenance/{rule}/{name}.json",  # what made a job's outputs: grpo_budget.experiment.provenance
}


# With a `sweep:` block, what training makes and what is evaluated on it gets one folder per variant under the run's
# folder; the subset stays where it is, shared by every variant (selection does not depend on training settings).
VARIANT_DIR = f"{RUN_DIR}/v-{{variant}}"
PER_VARIANT = ("checkpoints", "train_log", "manifest", "run_eval", "drift")


def paths(results: str, variants: bool = False) -> SimpleNamespace:
    """Every path pattern under ``results``, as attributes (``paths("results").subset``); ``variants``: the
    patterns of a sweep, whose training outputs have a ``{variant}`` level."""
    patterns = dict(PATTERNS)
    if variants:
        patterns.update({k: patterns[k].replace(RUN_DIR, VARIANT_DIR, 1) for k in PER_VARIANT})
    return SimpleNamespace(**{k: f"{results}/{v}" for k, v in patterns.items()})


RUN_NAME = "{model}_{dataset}_{policy}_b{budget}_s{seed}"  # a training or evaluation job's log and benchmark name

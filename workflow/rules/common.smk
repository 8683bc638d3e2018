# Validation, then thin lookups into grpo_budget.experiment.plan (paths, grid), the job builders
# (grpo_budget.cluster.jobs) and the registries.

import json
import os
import re
import shlex
import sys

from snakemake.exceptions import WorkflowError
from snakemake.io import apply_wildcards
from snakemake.utils import min_version

from grpo_budget import failures, lock
from grpo_budget.io import damage, write_text
from grpo_budget.aggregate.answer import closing_lines
from grpo_budget.aggregate.run import OUTPUTS, built, caption, names, report_category
from grpo_budget.cluster import cost, memory_plan
from grpo_budget.cluster.jobs import generation_job, training_job
from grpo_budget.cluster.work import write_jobs
from grpo_budget.config.schema import ConfigError
from grpo_budget.errors import UserError
from grpo_budget.experiment import config as grpo_config
from grpo_budget.experiment import plan, provenance, relative
from grpo_budget.experiment.rules import RULES, job_name, job_pattern, log_folder
from grpo_budget.hub import fetched, hub_id_of, store_pattern
from grpo_budget.select.policies import arm_names, policy_of

min_version("9.0")


# Jobs call the `grpo-budget` script of the environment Snakemake runs in, activated or not.
os.environ.update(PATH=os.pathsep.join([os.path.dirname(sys.executable), os.getenv("PATH", "")]))

try:
    # fills in defaults, reads relative input paths from the config file's folder; refuses a bad config before any job
    grpo_config.validate(config, relative.base_folder(workflow.configfiles))
except ConfigError as e:
    raise WorkflowError(f"invalid configuration: {e}") from None
try:
    memory_plan.check_config(config)  # device cuda: every GPU job fits its card (`grpo-budget plan` prints the plan)
except UserError as e:
    raise WorkflowError(f"memory plan: {e}") from None

if any(a == "--report" or a.startswith("--report=") for a in sys.argv[1:]):
    try:
        lock.refuse_report(config["results"])  # a report during a run would pack the previous run's tables
    except UserError as e:
        raise WorkflowError(str(e)) from None

P = plan.config_paths(config)  # with a `sweep:`, training and evaluation outputs have a {variant} level
# The run listing the aggregate jobs read: its path and text now, the file written in onstart (inside the lock).
LISTED = plan.listing(config)
LISTING, LISTING_TEXT = plan.listing_file(LISTED, config["results"])
NAME = r"[A-Za-z0-9][A-Za-z0-9_.-]*"


def log_file(rule):
    """A rule's log file, named as grpo_budget.experiment.rules.RULES says (the cost plan reads the same table)."""
    return P.log.format(rule=log_folder(rule), name=job_pattern(config, rule))


def benchmark_file(rule):
    return P.benchmark.format(rule=log_folder(rule), name=job_pattern(config, rule))


RECORDS = {}  # (rule, job name) -> (record path, the record its job would write now, its input paths)


def job_record(rule, wildcards):
    """The record the job of ``rule`` at ``wildcards`` writes when it succeeds (grpo_budget.experiment.provenance):
    its rule's settings, its inputs and the digests of the user's files it reads; with its path and inputs."""
    wc = dict(wildcards.items())
    name = job_name(config, rule, wc)
    if (rule, name) not in RECORDS:
        r = workflow.get_rule(rule)
        params = {k: _value(v, wildcards) for k, v in r.params.items() if k != "record"}
        inputs = [str(f) for k, v in r.input._allitems() if k != "provenance" for f in _evaluated(v, wildcards)]
        files = provenance.files_read(config, rule, wc, bool(get_model_input(wildcards)) if "model" in wc else True)
        path = os.path.abspath(P.provenance.format(rule=rule, name=name))
        RECORDS[rule, name] = path, provenance.wanted(config["results"], params, inputs, files), inputs
    return RECORDS[rule, name]


def _value(item, wildcards):
    """A rule's input or param item at ``wildcards``: a function called, a pattern filled."""
    return item(wildcards) if callable(item) else apply_wildcards(item, wildcards) if isinstance(item, str) else item


def _evaluated(item, wildcards):
    value = _value(item, wildcards)
    return [value] if isinstance(value, str) else list(value)


def provenance_check(rule):
    """An input function that adds no file: when the job's outputs exist but its record says other settings,
    inputs or files made them (or there is no readable record, or one of its inputs is gone, or an output is
    damaged: a Parquet file without its footer, JSON that does not parse), the job is forced, with one line saying
    why. It reads and writes nothing else: the job writes its record when it succeeds."""

    def check(wildcards):
        path, want, inputs = job_record(rule, wildcards)
        outputs = [apply_wildcards(str(o), wildcards) for o in workflow.get_rule(rule).output]
        if workflow.dag is None:
            return []
        read_only_notice()
        if not any(os.path.exists(o) for o in outputs):
            return []
        verdict = provenance.compare(path, want)
        missing = [] if not verdict.current else [i for i in inputs if not os.path.exists(i)]
        # a damaged output kept with its time looks up to date: found here, not when a later job reads it
        damaged = [] if not verdict.current or missing else [(o, why) for o in outputs if (why := damage(o))]
        if not verdict.current or missing or damaged:
            if not workflow.dag.forcefiles.issuperset(outputs):
                why = verdict.why or (f"its input {missing[0]} is missing" if missing else
                                      f"its output {damaged[0][0]} is {damaged[0][1]}")
                print(f"grpo-budget: {rule} job {job_name(config, rule, dict(wildcards.items()))}: {why}; "
                      "re-running it", file=sys.stderr)
            workflow.dag.forcefiles.update(outputs)
        return []

    return check


NOTED = set()


def read_only_notice():
    """A run that executes jobs (not -n, not --report) on a read-only results folder: one line saying so, printed
    while the DAG is built, before Snakemake's own "Write-protected output files" for the jobs it would run."""
    if "read-only" in NOTED or workflow.executor_plugin is None or workflow.dryrun:
        return
    NOTED.add("read-only")
    why = lock.read_only(config["results"])
    if why:
        print(f"grpo-budget: {why}: no job can write its outputs there; make it writable, or copy it and point "
              "results: at the copy (snakemake -n and --report only read it)", file=sys.stderr)


def record_args(rule):
    """A params function: the global options with which the job's command writes its record when it succeeds
    (and holds the job's lock while it runs: grpo_budget.lock)."""
    def args(wildcards):
        path, want, _ = job_record(rule, wildcards)
        return f"--record-out {shlex.quote(path)} --record {shlex.quote(json.dumps(want, sort_keys=True))}"

    return args


def host_mb(rule):
    """A GPU rule's host memory (MB), scaled to the model (config `models.NAME.size_b`, billions of parameters):
    base + per billion x size_b, as grpo_budget.experiment.rules.RULES says. GPU memory is the memory plan's
    (grpo_budget.cluster.memory_plan), checked above."""
    base, per_billion = RULES[rule].host_mb
    return lambda wc: int(base + per_billion * config["models"][wc.model]["size_b"])


def job_runtime(rule):
    """A GPU job's runtime request (minutes): the cost plan's estimate of its work x cost.margin, between
    cost.runtime_floor and cost.runtime_ceiling (grpo_budget.cluster.cost; `grpo-budget plan` prints the estimates)."""
    return lambda wc: cost.runtime_minutes(config, rule, dict(wc.items()))


def as_json(obj):
    return json.dumps(obj, sort_keys=True)


# The aggregate jobs' settings: the analysis section but analysis.drift, which adds jobs whose files the listing
# names (not a setting of any table), so the records of runs made before it existed stay valid.
AGGREGATE_SETTINGS = as_json({k: v for k, v in config["analysis"].items() if k != "drift"})


def get_dataset(wildcards, name=None):
    return as_json(config["datasets"][name or wildcards.dataset])


def get_leak_tests(wildcards):
    """The test tables a pool is checked against (its ood sets'; its own test split is checked in the job)."""
    if wildcards.split != "pool":
        return []
    return [P.data.format(dataset=d, split="test") for d in plan.leak_tests(config, wildcards.dataset)]


def models_with(key):
    """A wildcard constraint: the names of the models whose folder the rule of ``key`` makes (never matching when
    none: two rules make results/models/NAME)."""
    names = [m for m, spec in config["models"].items() if key in spec]
    return "|".join(map(re.escape, names)) if names else "(?!)"


def get_model_path(wildcards):
    return plan.model_path(config, wildcards.model)


def get_model_input(wildcards):
    """The bootstrapped or fetched model folder as an input (a hub id or an existing path is not a rule's output)."""
    if {"bootstrap", "gguf"} & set(config["models"][wildcards.model]) or fetched(config, wildcards.model):
        return [plan.model_path(config, wildcards.model)]
    return []


# GPU rules run in the GPU environment under --sdm conda (the CPU one on device cpu).
GPU_ENV = "../../envs/grpo-budget-gpu.yaml" if config["device"] == "cuda" else "../../envs/grpo-budget.yaml"
CPU_ENV = "../../envs/grpo-budget.yaml"


def get_num_generations_arg(wildcards):
    """``--group-size G`` for a policy that ranks by the training G (others do not, so their jobs never re-run
    when G changes)."""
    needs = policy_of(wildcards.policy).needs_num_generations
    return f" --group-size {config['training']['num_generations']}" if needs else ""


def get_source_arg(wildcards):
    """``--source S`` where a bare policy name ranks by another source than labels (``POLICY@SOURCE`` says it)."""
    source = config["scoring"]["difficulty"]
    return f" --source {source}" if source != "labels" else ""


def get_select_scores(wildcards):
    """The score table an arm selects from: its model's, or the proxy's for a proxy source."""
    return P.scores.format(model=plan.scored_by(config, wildcards.model, wildcards.policy), dataset=wildcards.dataset)


def get_adaptive_cuts_arg(wildcards):
    """``--cuts JSON`` for adaptive scoring (what its rounds must settle); nothing for fixed-K scoring."""
    cuts = plan.adaptive_cuts(config)
    return f" --cuts {shlex.quote(as_json(cuts))}" if cuts else ""


def get_generation_settings(rule):
    """A generating job's complete settings (grpo_budget.cluster.jobs.generation_job)."""
    return lambda wc: as_json(generation_job(config, rule, wc.model, getattr(wc, "evalset", None)).settings)


def get_training_settings(wildcards):
    """A training job's complete settings (grpo_budget.cluster.jobs.training_job)."""
    return as_json(training_job(config, wildcards.model, getattr(wildcards, "variant", None)).settings)


def get_final_only(wildcards):
    """Evaluation-only sets are evaluated on the final adapter alone (they are expensive and out of distribution)."""
    return "--final-only" if config["datasets"][wildcards.evalset]["eval_only"] else ""


def get_output_files(name):
    """The run files one aggregate output reads."""
    return plan.files_read(LISTED, OUTPUTS[name].reads)


def final_targets():
    """Every aggregate output; those that need out-of-distribution sets only when some dataset lists them."""
    wanted = built(config)
    files = [P.summary_csv, P.summary_md, P.summary_seeds, P.summary_html, P.summary_rst]
    files += expand([P.figure, P.figure_pdf], name=[n for n in wanted if OUTPUTS[n].kind == "figure"])
    files += expand([P.table, P.table_md, P.table_html], name=[n for n in wanted if OUTPUTS[n].kind == "table"])
    return files


def report_text():
    """The HTML report's landing page: the summary job's answer once it exists, else a page saying how to get it."""
    return os.path.abspath(P.summary_rst) if os.path.exists(P.summary_rst) else "workflow/report/no-answer.rst"

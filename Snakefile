# grpo-budget: which examples should a fixed GRPO data budget buy?
# models x datasets x selection policies x budgets x seeds -> prepare, score, select, train, evaluate, aggregate.
# Run `snakemake` for the embedded default (config.yaml), `snakemake --configfile configs/NAME.yaml` for an
# experiment, `snakemake --profile slurm <one result file>` on a cluster (see README).

# The embedded default applies only when no --configfile is given: an experiment config stands alone rather
# than being merged into the default's models and datasets.
if not workflow.overwrite_configfiles:

    configfile: "config.yaml"


include: "workflow/rules/common.smk"
wildcard_constraints:
    model=NAME,
    dataset=NAME,
    evalset=NAME,
    split="pool|test",
    policy="|".join(map(re.escape, arm_names())),
    budget=plan.BUDGET_REGEX,
    seed=r"\d+",
    variant=NAME,


include: "workflow/rules/prepare.smk"
include: "workflow/rules/score.smk"
include: "workflow/rules/select.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/evaluate.smk"
include: "workflow/rules/aggregate.smk"


report: report_text()  # `snakemake --report` opens on the answer


onstart:
    try:
        lock.acquire(config["results"])  # one writer per results folder (grpo_budget.lock)
    except UserError as e:
        raise WorkflowError(str(e)) from None
    failures.watch_stops()  # Ctrl-C or SIGTERM: onerror says what finished and what was stopped
    write_jobs(config)  # every job's work, which later cost plans join to this run's benchmark files
    if not os.path.exists(LISTING):  # the aggregate jobs read it; named by its content
        write_text(LISTING_TEXT, LISTING)


onsuccess:
    lock.release(config["results"])
    for line in closing_lines(P.summary_md, P.summary_html, workflow.overwrite_configfiles):
        print(line)  # the answer and where to read more (grpo_budget.aggregate.answer)


onerror:
    lock.release(config["results"])
    for line in failures.causes(log):  # the cause of each failed job, beside its log path
        print(line, file=sys.stderr)
    if failures.STOPS:
        for line in failures.stop_report(failures.read_logs(log), failures.STOPS[0]):
            print(line, file=sys.stderr)


rule all:
    input:
        final_targets(),
    default_target: True

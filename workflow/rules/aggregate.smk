# Aggregate stage: every table and figure is its own job, and reads only the cached files it needs (listing_files).
# Captions for the HTML report (`snakemake --report report.html`) are in workflow/report/.

AGGREGATE_KIND = {
    "accuracy_vs_checkpoint": "figure-accuracy",
    "learnable_vs_step": "figure-learnable",
    "pass_rate_histogram": "figure-pass-rates",
    "accuracy_by_difficulty": "figure-difficulty",
    "learnable": "table-learnable",
    "difficulty": "table-difficulty",
    "ood": "table-ood",
}


rule summary:
    """Gains table: accuracy of base and each arm (final and best checkpoint), gains with paired bootstrap intervals."""
    input:
        lambda wc: listing_files("summary"),
    output:
        csv=report(SUMMARY_CSV, caption="../report/summary.rst", category="Tables", labels={"table": "gains", "format": "CSV, per seed"}),
        md=SUMMARY_MD,
        seeds=SUMMARY_SEEDS,
        html=report(SUMMARY_HTML, caption="../report/summary.rst", category="Tables", labels={"table": "gains", "format": "HTML"}),
    params:
        runs=lambda wc: as_json(runs_listing()),
        settings=as_json(config["analysis"]),
    log:
        log_file("aggregate", "summary"),
    benchmark:
        benchmark_file("aggregate", "summary")
    conda:
        "../../envs/grpo-budget.yaml"
    shell:
        "grpo-budget aggregate summary --runs {params.runs:q} --settings {params.settings:q}"
        " --out {output.csv:q} {output.md:q} {output.seeds:q} {output.html:q} > {log:q} 2>&1"


rule table:
    """One table of the aggregate stage: CSV (per seed), Markdown and HTML (per arm)."""
    input:
        lambda wc: listing_files(wc.table),
    output:
        csv=report(TABLE, caption="../report/table.rst", category="Tables", labels={"table": "{table}", "format": "CSV, per seed"}),
        md=TABLE_MD,
        html=report(TABLE_HTML, caption="../report/table.rst", category="Tables", labels={"table": "{table}", "format": "HTML"}),
    wildcard_constraints:
        table="|".join(TABLES),
    params:
        runs=lambda wc: as_json(runs_listing()),
        kind=lambda wc: AGGREGATE_KIND[wc.table],
        settings=as_json(config["analysis"]),
    log:
        log_file("aggregate", "table_{table}"),
    benchmark:
        benchmark_file("aggregate", "table_{table}")
    conda:
        "../../envs/grpo-budget.yaml"
    shell:
        "grpo-budget aggregate {params.kind} --runs {params.runs:q} --settings {params.settings:q}"
        " --out {output.csv:q} {output.md:q} {output.html:q} > {log:q} 2>&1"


rule figure:
    """One figure of the aggregate stage, as PNG and PDF."""
    input:
        lambda wc: listing_files(wc.name),
    output:
        png=report(FIGURE, caption="../report/figure.rst", category="Figures", labels={"figure": "{name}"}),
        pdf=FIGURE_PDF,
    params:
        runs=lambda wc: as_json(runs_listing()),
        kind=lambda wc: AGGREGATE_KIND[wc.name],
        settings=as_json(config["analysis"]),
    log:
        log_file("aggregate", "{name}"),
    benchmark:
        benchmark_file("aggregate", "{name}")
    conda:
        "../../envs/grpo-budget.yaml"
    shell:
        "grpo-budget aggregate {params.kind} --runs {params.runs:q} --settings {params.settings:q}"
        " --out {output.png:q} {output.pdf:q} > {log:q} 2>&1"

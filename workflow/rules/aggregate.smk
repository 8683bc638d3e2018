# Aggregate stage: every output of the registry grpo_budget.aggregate.outputs.OUTPUTS is its own job and reads only
# the files it needs. Captions for the HTML report (`snakemake --report report.html`) are in workflow/grpo_budget/aggregate/captions/.


rule summary:
    """Gains table: accuracy of base and each arm (final and best checkpoint), gains with paired bootstrap intervals."""
    input:
        files=get_output_files("summary"),
        provenance=provenance_check("summary"),
    output:
        csv=report(P.summary_csv, caption="../report/output.rst", category=report_category("summary", "csv"), labels={"table": "gains"}),
        md=P.summary_md,
        seeds=P.summary_seeds,
        html=report(P.summary_html, caption="../report/output.rst", category=report_category("summary"), labels={"table": "gains"}),
        rst=P.summary_rst,
    params:
        listing=LISTING,
        record=record_args("summary"),
        settings=AGGREGATE_SETTINGS,
        caption=caption("summary", config),
    log:
        log_file("summary"),
    benchmark:
        benchmark_file("summary")
    conda:
        CPU_ENV
    shell:
        "grpo-budget {params.record} aggregate summary --listing {params.listing:q} --settings {params.settings:q}"
        " --out {output.csv:q} {output.md:q} {output.seeds:q} {output.html:q} {output.rst:q} > {log:q} 2>&1"


rule table:
    """One table of the aggregate stage: CSV (per seed), Markdown and HTML (per arm)."""
    input:
        files=lambda wc: get_output_files(wc.name),
        provenance=provenance_check("table"),
    output:
        csv=report(P.table, caption="../report/output.rst", category=lambda wc: report_category(wc.name, "csv"), labels={"table": "{name}"}),
        md=P.table_md,
        html=report(P.table_html, caption="../report/output.rst", category=lambda wc: report_category(wc.name), labels={"table": "{name}"}),
    wildcard_constraints:
        name="|".join(names("table")),
    params:
        listing=LISTING,
        record=record_args("table"),
        settings=AGGREGATE_SETTINGS,
        caption=lambda wc: caption(wc.name, config),
    log:
        log_file("table"),
    benchmark:
        benchmark_file("table")
    conda:
        CPU_ENV
    shell:
        "grpo-budget {params.record} aggregate {wildcards.name} --listing {params.listing:q} --settings {params.settings:q}"
        " --out {output.csv:q} {output.md:q} {output.html:q} > {log:q} 2>&1"


rule figure:
    """One figure of the aggregate stage, as PNG and PDF."""
    input:
        files=lambda wc: get_output_files(wc.name),
        provenance=provenance_check("figure"),
    output:
        png=report(P.figure, caption="../report/output.rst", category=lambda wc: report_category(wc.name), labels={"figure": "{name}"}),
        pdf=P.figure_pdf,
    wildcard_constraints:
        name="|".join(names("figure")),
    params:
        listing=LISTING,
        record=record_args("figure"),
        settings=AGGREGATE_SETTINGS,
        caption=lambda wc: caption(wc.name, config),
    log:
        log_file("figure"),
    benchmark:
        benchmark_file("figure")
    conda:
        CPU_ENV
    shell:
        "grpo-budget {params.record} aggregate {wildcards.name} --listing {params.listing:q} --settings {params.settings:q}"
        " --out {output.png:q} {output.pdf:q} > {log:q} 2>&1"

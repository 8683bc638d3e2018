rule summary:
    """Accuracy of base and each arm, gains with paired bootstrap intervals, learnability."""
    input:
        lambda wc: listing_files("summary"),
    output:
        csv=report(SUMMARY_CSV, caption="../report/summary.rst", category="Tables"),
        md=SUMMARY_MD,
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
        " --out {output.csv:q} {output.md:q} > {log:q} 2>&1"


rule figure:
    """One figure of the aggregate stage."""
    input:
        lambda wc: listing_files(wc.name),
    output:
        report(FIGURE, caption="../report/{name}.rst", category="Figures"),
    params:
        runs=lambda wc: as_json(runs_listing()),
        kind=lambda wc: {
            "accuracy_vs_checkpoint": "figure-accuracy",
            "learnable_vs_step": "figure-learnable",
            "pass_rate_histogram": "figure-pass-rates",
        }[wc.name],
        settings=as_json(config["analysis"]),
    log:
        log_file("aggregate", "{name}"),
    benchmark:
        benchmark_file("aggregate", "{name}")
    conda:
        "../../envs/grpo-budget.yaml"
    shell:
        "grpo-budget aggregate {params.kind} --runs {params.runs:q} --settings {params.settings:q}"
        " --out {output:q} > {log:q} 2>&1"

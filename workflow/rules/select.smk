# Select stage: a budget cut from the scored pool by policy and difficulty source (grpo_budget.select).


rule select:
    """Cut the budget from the scored pool by policy and difficulty source (seeded tie-breaks)."""
    input:
        scores=get_select_scores,
        provenance=provenance_check("select"),
    output:
        P.subset,
    params:
        record=record_args("select"),
        tiers=lambda wc: as_json(config["datasets"][wc.dataset].get("tiers")),
        rounding=config["budget_rounding"],
        group_size=get_num_generations_arg,  # training.num_generations, under the name select records have held
        source=get_source_arg,
    log:
        log_file("select"),
    benchmark:
        benchmark_file("select")
    conda:
        CPU_ENV
    shell:
        "grpo-budget {params.record} select --scores {input.scores:q} --policy {wildcards.policy} --budget {wildcards.budget}"
        " --seed {wildcards.seed} --rounding {params.rounding} --tiers {params.tiers:q}"
        "{params.group_size}{params.source} --out {output:q} > {log:q} 2>&1"

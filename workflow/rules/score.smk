rule score:
    """K samples per pool item from the base model, graded: pass rate = difficulty."""
    input:
        pool=P.data.replace("{split}", "pool"),
        model=get_model_input,
    output:
        P.scores,
    params:
        model=get_model_path,
        settings=get_generation_settings("scoring"),
        dataset=get_dataset,
        cuts=get_adaptive_cuts_arg,
    threads: 1
    resources:
        mem_mb=scaled("score", "mem_mb"),
        runtime=job_runtime("score"),
    log:
        log_file("score", "{model}_{dataset}"),
    benchmark:
        benchmark_file("score", "{model}_{dataset}")
    conda:
        "../../envs/grpo-budget.yaml"
    shell:
        "grpo-budget --threads {threads} score --model {params.model:q} --pool {input.pool:q}"
        " --settings {params.settings:q} --dataset {params.dataset:q}{params.cuts} --out {output:q}"
        " > {log:q} 2>&1"


rule select:
    """Cut the budget from the scored pool by policy and difficulty source (seeded tie-breaks)."""
    input:
        get_select_scores,
    output:
        P.subset,
    params:
        tiers=lambda wc: as_json(config["datasets"][wc.dataset].get("tiers")),
        rounding=config["budget_rounding"],
        group_size=get_group_size_arg,
        source=get_source_arg,
    log:
        log_file("select", "{model}_{dataset}_{policy}_b{budget}_s{seed}"),
    benchmark:
        benchmark_file("select", "{model}_{dataset}_{policy}_b{budget}_s{seed}")
    conda:
        "../../envs/grpo-budget.yaml"
    shell:
        "grpo-budget select --scores {input:q} --policy {wildcards.policy} --budget {wildcards.budget}"
        " --seed {wildcards.seed} --rounding {params.rounding} --tiers {params.tiers:q}"
        "{params.group_size}{params.source} --out {output:q} > {log:q} 2>&1"


rule verify:
    """Fresh samples (a new seed) on every selected item: pass rates free of the selection's winner's curse."""
    input:
        subsets=lambda wc: plan.subsets_of(config, wc.model, wc.dataset),
        model=get_model_input,
    output:
        P.verify,
    params:
        model=get_model_path,
        settings=get_generation_settings("verify"),
        dataset=get_dataset,
    threads: 1
    resources:
        mem_mb=scaled("score", "mem_mb"),
        runtime=job_runtime("verify"),
    log:
        log_file("verify", "{model}_{dataset}"),
    benchmark:
        benchmark_file("verify", "{model}_{dataset}")
    conda:
        "../../envs/grpo-budget.yaml"
    shell:
        "grpo-budget --threads {threads} verify --model {params.model:q} --subsets {input.subsets:q}"
        " --settings {params.settings:q} --dataset {params.dataset:q} --out {output:q} > {log:q} 2>&1"

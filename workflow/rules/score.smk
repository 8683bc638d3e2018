rule score:
    """K samples per pool item from the base model, graded: pass rate = difficulty."""
    input:
        pool=DATA.replace("{split}", "pool"),
        model=model_input,
    output:
        SCORES,
    params:
        model=lambda wc: model_path(wc.model),
        settings=lambda wc: gen_settings("scoring", wc.model),
        dataset=lambda wc: dataset_json(wc.dataset),
        seed=config["scoring"]["seed"],
    threads: 1
    resources:
        mem_mb=scaled("score", "mem_mb"),
        runtime=scaled("score", "runtime"),
    log:
        log_file("score", "{model}_{dataset}"),
    benchmark:
        benchmark_file("score", "{model}_{dataset}")
    conda:
        "../../envs/grpo-budget.yaml"
    shell:
        "grpo-budget --threads {threads} score --model {params.model:q} --pool {input.pool:q}"
        " --settings {params.settings:q} --dataset {params.dataset:q} --seed {params.seed} --out {output:q}"
        " > {log:q} 2>&1"


rule select:
    """Cut the budget from the scored pool by policy (seeded tie-breaks)."""
    input:
        SCORES,
    output:
        SUBSET,
    params:
        tiers=lambda wc: as_json(config["datasets"][wc.dataset].get("tiers")),
    log:
        log_file("select", "{model}_{dataset}_{policy}_b{budget}_s{seed}"),
    benchmark:
        benchmark_file("select", "{model}_{dataset}_{policy}_b{budget}_s{seed}")
    conda:
        "../../envs/grpo-budget.yaml"
    shell:
        "grpo-budget select --scores {input:q} --policy {wildcards.policy} --budget {wildcards.budget}"
        " --seed {wildcards.seed} --tiers {params.tiers:q} --out {output:q} > {log:q} 2>&1"

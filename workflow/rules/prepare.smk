# Prepare stage: each dataset entry of the config as pool and test Parquet tables (grpo_budget.prepare).


rule prepare:
    """A dataset entry of the config -> one split (pool or test) as Parquet."""
    output:
        P.data,
    params:
        dataset=get_dataset,
    log:
        log_file("prepare"),
    benchmark:
        benchmark_file("prepare")
    conda:
        "../../envs/grpo-budget.yaml"
    shell:
        "grpo-budget prepare --dataset {params.dataset:q} --out {wildcards.split}={output:q} > {log:q} 2>&1"

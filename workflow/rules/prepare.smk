rule prepare:
    """A dataset entry of the config -> one split (pool or test) as Parquet."""
    output:
        P.data,
    params:
        dataset=get_dataset,
    log:
        log_file("prepare", "{dataset}_{split}"),
    benchmark:
        benchmark_file("prepare", "{dataset}_{split}")
    conda:
        "../../envs/grpo-budget.yaml"
    shell:
        "grpo-budget prepare --dataset {params.dataset:q} --out {wildcards.split}={output:q} > {log:q} 2>&1"


rule bootstrap_model:
    """The embedded default's base model: a tiny Llama trained here to a target pass rate."""
    input:
        exclude=lambda wc: P.data.format(dataset=config["models"][wc.model]["bootstrap"]["dataset"], split="test"),
    output:
        directory(P.model),
    params:
        dataset=lambda wc: get_dataset(wc, config["models"][wc.model]["bootstrap"]["dataset"]),
        settings=lambda wc: as_json(config["models"][wc.model]["bootstrap"]),
    threads: 2
    log:
        log_file("bootstrap_model", "{model}"),
    benchmark:
        benchmark_file("bootstrap_model", "{model}")
    conda:
        "../../envs/grpo-budget.yaml"
    shell:
        "grpo-budget --threads {threads} bootstrap-model --dataset {params.dataset:q} --settings {params.settings:q}"
        " --exclude {input.exclude:q} --out {output:q} > {log:q} 2>&1"

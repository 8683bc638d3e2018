rule evaluate_base:
    """The base model (step 0) on one test set."""
    input:
        test=DATA.replace("{dataset}", "{evalset}").replace("{split}", "test"),
        model=model_input,
    output:
        BASE_EVAL,
    params:
        model=lambda wc: model_path(wc.model),
        settings=lambda wc: gen_settings("evaluation", wc.model, wc.evalset),
        dataset=lambda wc: dataset_json(wc.evalset),
        seed=config["evaluation"]["seed"],
    threads: 1
    resources:
        mem_mb=scaled("evaluate", "mem_mb"),
        runtime=scaled("evaluate", "runtime"),
    log:
        log_file("evaluate_base", "{model}_{evalset}"),
    benchmark:
        benchmark_file("evaluate_base", "{model}_{evalset}")
    conda:
        "../../envs/grpo-budget.yaml"
    shell:
        "grpo-budget --threads {threads} evaluate --model {params.model:q} --test {input.test:q}"
        " --settings {params.settings:q} --dataset {params.dataset:q} --seed {params.seed} --out {output:q}"
        " > {log:q} 2>&1"


rule evaluate:
    """Every saved checkpoint of one arm on one test set."""
    input:
        test=DATA.replace("{dataset}", "{evalset}").replace("{split}", "test"),
        manifest=MANIFEST,
        model=model_input,
    output:
        RUN_EVAL,
    params:
        model=lambda wc: model_path(wc.model),
        settings=lambda wc: gen_settings("evaluation", wc.model, wc.evalset),
        dataset=lambda wc: dataset_json(wc.evalset),
        seed=config["evaluation"]["seed"],
        final_only=final_only,
    threads: 1
    resources:
        mem_mb=scaled("evaluate", "mem_mb"),
        runtime=scaled("evaluate", "runtime"),
    log:
        log_file("evaluate", "{model}_{dataset}_{policy}_b{budget}_s{seed}_{evalset}"),
    benchmark:
        benchmark_file("evaluate", "{model}_{dataset}_{policy}_b{budget}_s{seed}_{evalset}")
    conda:
        "../../envs/grpo-budget.yaml"
    shell:
        "grpo-budget --threads {threads} evaluate --model {params.model:q} --test {input.test:q}"
        " --manifest {input.manifest:q} {params.final_only} --settings {params.settings:q} --dataset {params.dataset:q}"
        " --seed {params.seed} --out {output:q} > {log:q} 2>&1"

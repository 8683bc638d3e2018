# Prepare stage: each dataset entry of the config as pool and test Parquet tables (grpo_budget.prepare).


rule prepare:
    """A dataset entry of the config -> one split (pool or test) as Parquet; a pool shares no prompt with the test
    sets its arms are evaluated on."""
    input:
        against=get_leak_tests,
        provenance=provenance_check("prepare"),
    output:
        P.data,
    params:
        record=record_args("prepare"),
        dataset=get_dataset,
    log:
        log_file("prepare"),
    benchmark:
        benchmark_file("prepare")
    conda:
        CPU_ENV
    shell:
        "grpo-budget {params.record} prepare --dataset {params.dataset:q} --out {wildcards.split}={output:q}"
        " --against {input.against:q} > {log:q} 2>&1"


if config["model_store"]:

    localrules: fetch_model

    rule fetch_model:
        """A hub model downloaded once into model_store, on the machine Snakemake runs on (a login node with
        network access), before any GPU job reads it with the hub offline."""
        output:
            directory(store_pattern(config)),
        params:
            hub_id=lambda wc: hub_id_of(config, wc.hub_model),
            partial=lambda wc: os.path.join(config["model_store"], ".partial", wc.hub_model),
        log:
            P.log.format(rule="fetch_model", name="{hub_model}"),
        conda:
            CPU_ENV
        shell:
            "grpo-budget fetch-model --hub-id {params.hub_id:q} --partial {params.partial:q} --out {output:q}"
            " > {log:q} 2>&1"

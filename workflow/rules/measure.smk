# Validation and timing of one variant in one mode, in one job and one worker: each sweep shape is timed right after
# it passed validation, on the same reference; a shape that failed is not timed. A shell command, not a script: the
# serial GPU path starts one such process per variant and mode, and gemmbench.job imports no Snakemake.
rule measure:
    input:
        build="results/build/{family}/{variant}/{mode}.json",
    output:
        validation="results/validate/{family}/{variant}/{mode}.json",
        bench="results/bench/{family}/{variant}/{mode}.json",
    log:
        "results/logs/measure/{family}/{variant}/{mode}.log",
    benchmark:
        "results/benchmarks/measure/{family}/{variant}/{mode}.tsv"
    priority: gpu_first(gpus_needed)
    conda:
        "../../environment.yml"
    threads: threads_needed
    resources:
        gpu=gpus_needed,
    params:
        config=lambda w: json.dumps(config_for(config, "measure", f"{w.family}/{w.variant}", w.mode)),
    shell:
        "python -m gemmbench.job measure --config {params.config:q} --log {log:q} "
        "--variant {wildcards.family}/{wildcards.variant} --mode {wildcards.mode} --build {input.build:q} "
        "--validation {output.validation:q} --bench {output.bench:q}"

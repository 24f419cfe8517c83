# Validation and timing of one variant in one mode, in one job and one worker: each sweep shape is timed right after
# it passed validation, on the same reference; a shape that failed is not timed.
rule measure:
    input:
        build="results/build/{family}/{variant}/{mode}.json",
    output:
        validation="results/validate/{family}/{variant}/{mode}.json",
        bench="results/bench/{family}/{variant}/{mode}.json",
    log:
        "results/logs/measure/{family}/{variant}/{mode}.log",
    conda:
        "../../environment.yml"
    threads: threads_needed
    resources:
        gpu=gpus_needed,
    params:
        config=lambda w: stages.config_for(config, "measure", f"{w.family}/{w.variant}", w.mode),
    script:
        "../scripts/measure.py"

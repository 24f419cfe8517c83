rule validate:
    input:
        build="results/build/{family}/{variant}/{mode}.json",
    output:
        "results/validate/{family}/{variant}/{mode}.json",
    log:
        "results/logs/validate/{family}/{variant}/{mode}.log",
    conda:
        "../../environment.yml"
    threads: threads_needed
    resources:
        gpu=gpus_needed,
    params:
        config=lambda w: stages.config_for(config, "validate", f"{w.family}/{w.variant}", w.mode),
    script:
        "../scripts/validate.py"

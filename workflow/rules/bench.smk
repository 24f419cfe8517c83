rule bench:
    input:
        build="results/build/{family}/{variant}/{mode}.json",
        validation="results/validate/{family}/{variant}/{mode}.json",
    output:
        "results/bench/{family}/{variant}/{mode}.json",
    log:
        "results/logs/bench/{family}/{variant}/{mode}.log",
    conda:
        "../../environment.yml"
    threads: threads_needed
    resources:
        gpu=gpus_needed,
    params:
        config=lambda w: stages.config_for(config, "bench", f"{w.family}/{w.variant}", w.mode),
    script:
        "../scripts/bench.py"

rule bench:
    input:
        build="results/build/{family}/{variant}/{mode}.json",
        validation="results/validate/{family}/{variant}/{mode}.json",
    output:
        "results/bench/{family}/{variant}/{mode}/{shape}.json",
    params:
        timing=config["timing"],
        cache=config["cache"],
        cache_dir=cache_dir,
    threads: threads_needed
    resources:
        gpu=gpus_needed,
    log:
        "results/logs/bench/{family}/{variant}/{mode}/{shape}.log",
    conda:
        "../../environment.yml"
    script:
        "../scripts/bench.py"

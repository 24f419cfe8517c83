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
        shapes=lambda w: [s.label for s in plan.sweep_shapes(config)],
        timing=config["timing"],
        cache=config["cache"],
    script:
        "../scripts/bench.py"

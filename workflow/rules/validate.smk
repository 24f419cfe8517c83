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
        shapes=lambda w: [s.label for s in plan.validation_shapes(config)],
        tolerance=lambda w: config["tolerance"][w.mode],
        seed=config["seed"],
    script:
        "../scripts/validate.py"

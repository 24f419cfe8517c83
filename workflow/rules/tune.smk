rule tune:
    input:
        sources=variant_sources,
    output:
        "results/tune/{gpu}/{family}/{variant}/{mode}.json",
    log:
        "results/logs/tune/{gpu}/{family}/{variant}/{mode}.log",
    conda:
        "../../environment.yml"
    resources:
        gpu=tuning_gpus,
    params:
        space=lambda w: variant_of(w).space,
        settings=config["tune"],
    script:
        "../scripts/tune.py"

rule tune:
    input:
        sources=variant_sources,
    output:
        "results/tune/{gpu}/{family}/{variant}/{mode}.json",
    params:
        space=lambda w: variant_of(w).space,
        settings=config["tune"],
    resources:
        gpu=tuning_gpus,
    log:
        "results/logs/tune/{gpu}/{family}/{variant}/{mode}.log",
    conda:
        "../../environment.yml"
    script:
        "../scripts/tune.py"

rule tune:
    input:
        sources=variant_sources,
        committed=committed_tuning,
    output:
        "results/tune/{gpu}/{family}/{variant}/{mode}.json",
    log:
        "results/logs/tune/{gpu}/{family}/{variant}/{mode}.log",
    benchmark:
        "results/benchmarks/tune/{gpu}/{family}/{variant}/{mode}.tsv"
    conda:
        "../../environment.yml"
    resources:
        gpu=tuning_gpus,
    params:
        config=lambda w: config_for(config, "tune", f"{w.family}/{w.variant}", w.mode),
        space=lambda w: variant_of(w).space,
    script:
        "../scripts/tune.py"

rule build:
    input:
        source=variant_sources,
        tuning=tuning_result,
    output:
        "results/build/{family}/{variant}/{mode}.json",
    log:
        "results/logs/build/{family}/{variant}/{mode}.log",
    benchmark:
        "results/benchmarks/build/{family}/{variant}/{mode}.tsv"
    conda:
        "../../environment.yml"
    resources:
        gpu=gpus_needed,
    params:
        config=lambda w: config_for(config, "build", f"{w.family}/{w.variant}", w.mode),
        toolchain=provenance.toolchain(),  # a new compiler or library rebuilds, and so re-validates and re-measures
    script:
        "../scripts/build.py"

rule build:
    input:
        source=variant_sources,
        tuning=tuning_result,
    output:
        "results/build/{family}/{variant}/{mode}.json",
    params:
        variant_params=lambda w: plan.params(config, variant_of(w)),
    resources:
        gpu=gpus_needed,
    log:
        "results/logs/build/{family}/{variant}/{mode}.log",
    conda:
        "../../environment.yml"
    script:
        "../scripts/build.py"

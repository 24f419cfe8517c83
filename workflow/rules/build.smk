rule device_facts:
    output:
        "results/device.json",
    params:
        device=DEVICE,
        reason=DEVICE_REASON,
    resources:
        gpu=1 if DEVICE == "cuda" else 0,
    log:
        "results/logs/device_facts.log",
    conda:
        "../../environment.yml"
    script:
        "../scripts/device_facts.py"


rule build:
    input:
        source=variant_sources,
        tuning=tuning_result,
    output:
        "results/build/{family}/{variant}/{mode}.json",
    params:
        variant_params=lambda w: plan.params(config, variant_of(w)),
        cache_dir=cache_dir,
    resources:
        gpu=gpus_needed,
    log:
        "results/logs/build/{family}/{variant}/{mode}.log",
    conda:
        "../../environment.yml"
    script:
        "../scripts/build.py"

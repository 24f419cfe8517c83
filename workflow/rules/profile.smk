# Nsight Compute's counters of one launch per GPU variant, mode and profiled size (gemmbench/measure/ncu.py), taken
# on the GPU like a measure job: its own target (snakemake --cores all profile), and part of the run with
# profile.enabled, whose report then explains each rung in counters.
rule profile_variant:
    input:
        build="results/build/{family}/{variant}/{mode}.json",
    output:
        "results/profile/{family}/{variant}/{mode}.json",
    log:
        "results/logs/profile/{family}/{variant}/{mode}.log",
    benchmark:
        "results/benchmarks/profile_variant/{family}/{variant}/{mode}.tsv"
    conda:
        "../../environment.yml"
    resources:
        gpu=1,
    params:
        config=lambda w: json.dumps(config_for(config, "profile", f"{w.family}/{w.variant}", w.mode)),
    shell:
        "python -m gemmbench.job profile --config {params.config:q} --log {log:q} "
        "--variant {wildcards.family}/{wildcards.variant} --mode {wildcards.mode} --build {input.build:q} "
        "--out {output:q}"


rule profile_table:
    input:
        planned_on_gpu("results/profile/{family}/{variant}/{mode}.json"),
    output:
        csv=report("results/tables/profile.csv", caption="../report/profile_table.rst", category="Tables"),
        parquet="results/tables/profile.parquet",
    log:
        "results/logs/profile_table.log",
    conda:
        "../../environment.yml"
    script:
        "../scripts/profile_table.py"


rule profile:
    input:
        rules.profile_table.output.csv,

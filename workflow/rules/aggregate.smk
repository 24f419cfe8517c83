rule aggregate:
    input:
        builds=planned("results/build/{family}/{variant}/{mode}.json"),
        validations=planned("results/validate/{family}/{variant}/{mode}.json"),
        benches=planned("results/bench/{family}/{variant}/{mode}.json"),
    output:
        summary=report("results/tables/summary.csv", caption="../report/summary_table.rst", category="Tables"),
        samples=report("results/tables/samples.csv", caption="../report/samples_table.rst", category="Tables"),
        validation=report("results/tables/validation.csv", caption="../report/validation_table.rst", category="Tables"),
        builds=report("results/tables/builds.csv", caption="../report/builds_table.rst", category="Tables"),
        parquet=expand("results/tables/{table}.parquet", table=["summary", "samples", "validation", "builds"]),
        devices="results/tables/devices.json",
    log:
        "results/logs/aggregate.log",
    benchmark:
        "results/benchmarks/aggregate/aggregate.tsv"
    conda:
        "../../environment.yml"
    params:
        device_reason=DEVICE_REASON,
    script:
        "../scripts/aggregate.py"

FIGURES = views.figures(config["workloads"], VARIANTS.values())


rule plot:
    input:
        summary="results/tables/summary.parquet",
        validation="results/tables/validation.parquet",
        builds="results/tables/builds.parquet",
        devices="results/tables/devices.json",
    output:
        png=[
            report(
                f"reports/figures/{name}.png", caption=f"../report/{views.figure_of(name)[1]}.rst", category="Figures"
            )
            for name in FIGURES
        ],
        svg=[f"reports/figures/{name}.svg" for name in FIGURES],
    log:
        "results/logs/plot.log",
    benchmark:
        "results/benchmarks/plot/plot.tsv"
    conda:
        "../../environment.yml"
    threads: len(FIGURES)  # one process per figure
    script:
        "../scripts/plot.py"


rule report:
    input:
        summary=rules.aggregate.output.summary,
        samples=rules.aggregate.output.samples,
        parquet=rules.aggregate.output.parquet,
        devices=rules.aggregate.output.devices,
        figures=rules.plot.output.png,
        compared_with=[config["compare_with"]] if config["compare_with"] else [],
        profile=[rules.profile_table.output.parquet] if config["profile"]["enabled"] else [],
    output:
        report("reports/report.html", caption="../report/html_report.rst", category="Report"),
    log:
        "results/logs/report.log",
    conda:
        "../../environment.yml"
    script:
        "../scripts/report.py"

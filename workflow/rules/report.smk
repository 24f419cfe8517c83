FIGURES = ["tflops_vs_size", "pct_of_cublas", "roofline", "validation_error"]


rule plot:
    input:
        summary="results/tables/summary.csv",
        validation="results/tables/validation.csv",
        devices="results/tables/devices.json",
    output:
        png=[report(f"reports/figures/{name}.png", caption=f"../report/{name}.rst", category="Figures")
             for name in FIGURES],
        svg=[f"reports/figures/{name}.svg" for name in FIGURES],
    log:
        "results/logs/plot.log",
    script:
        "../scripts/plot.py"


rule report:
    input:
        rules.aggregate.output,
        rules.plot.output,
    output:
        "reports/report.html",
    params:
        tables="results/tables",
        figures="reports/figures",
    log:
        "results/logs/report.log",
    script:
        "../scripts/report.py"

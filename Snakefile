# gemmbench: how close does each way of writing a matrix multiplication get to the GPU's limit and to cuBLAS?
# Run: snakemake --cores all            (config: config/config.yaml; CPU-only try: --configfile config/cpu.yaml)
import os

from snakemake.utils import min_version

min_version("9.0")


configfile: os.path.join(workflow.basedir, "config/config.yaml")


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/tune.smk"
include: "workflow/rules/build.smk"
include: "workflow/rules/measure.smk"
include: "workflow/rules/profile.smk"
include: "workflow/rules/aggregate.smk"
include: "workflow/rules/report.smk"


# The tables are a target too: with results/ removed, the same command measures everything again (and writes the
# report again from it), where a report alone would be "up to date".
rule all:
    input:
        "reports/report.html",
        "results/tables/summary.csv",

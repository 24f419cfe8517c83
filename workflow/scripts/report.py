from pathlib import Path

from gemmbench import logs
from gemmbench.stages import report
from kernels import registry

logs.setup(snakemake.log[0])
registry.load(snakemake.config["variant_modules"])  # they may register workloads the rows name
report.run(snakemake.config, Path(snakemake.input.summary).parent, snakemake.input.figures, snakemake.output[0])

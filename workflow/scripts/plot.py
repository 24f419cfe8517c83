from pathlib import Path

from gemmbench import logs
from gemmbench.stages import plot
from kernels import registry

logs.setup(snakemake.log[0])
registry.load(snakemake.config["variant_modules"])  # they may register workloads the rows name
plot.run(Path(snakemake.input.summary).parent, snakemake.output.png, snakemake.threads)

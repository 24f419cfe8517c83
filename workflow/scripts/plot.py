from pathlib import Path

from gemmbench import logs, stages

logs.setup(snakemake.log[0])
stages.plot(snakemake.config, Path(snakemake.input.summary).parent, Path(snakemake.output.png[0]).parent)

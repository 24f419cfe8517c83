from pathlib import Path

from gemmbench import logs, stages

logs.setup(snakemake.log[0])
stages.plot(Path(snakemake.input.summary).parent, snakemake.output.png)

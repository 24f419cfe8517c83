from pathlib import Path

from gemmbench import logs, stages

logs.setup(snakemake.log[0])
stages.report(snakemake.config, Path(snakemake.input.summary).parent, Path(snakemake.input.figures[0]).parent,
              snakemake.output[0])

from pathlib import Path

from gemmbench import logs, stages

logs.setup(snakemake.log[0])
stages.report(snakemake.config, Path(snakemake.input.summary).parent, snakemake.input.figures, snakemake.output[0])

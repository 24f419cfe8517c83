from gemmbench import logs, stages

logs.setup(snakemake.log[0])
stages.report(snakemake.config, snakemake.params.tables, snakemake.params.figures, snakemake.output[0])

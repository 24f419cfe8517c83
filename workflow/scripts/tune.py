from gemmbench import logs, stages

logs.setup(snakemake.log[0])
w = snakemake.wildcards
stages.tune(snakemake.params.config, f"{w.family}/{w.variant}", w.mode, w.gpu, snakemake.output[0])

from gemmbench import logs, stages

logs.setup(snakemake.log[0])
w = snakemake.wildcards
stages.build(snakemake.params.config, f"{w.family}/{w.variant}", w.mode, snakemake.output[0],
             snakemake.input.get("tuning"))

from gemmbench import logs, stages

logs.setup(snakemake.log[0])
w = snakemake.wildcards
stages.validate(snakemake.params.config, f"{w.family}/{w.variant}", w.mode, snakemake.input.build,
                snakemake.output[0])

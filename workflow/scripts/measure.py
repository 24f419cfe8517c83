from gemmbench import logs, stages

logs.setup(snakemake.log[0])
w = snakemake.wildcards
stages.measure(snakemake.params.config, f"{w.family}/{w.variant}", w.mode, snakemake.input.build,
               snakemake.output.validation, snakemake.output.bench)

from gemmbench import logs, stages

logs.setup(snakemake.log[0])
w = snakemake.wildcards
stages.bench(snakemake.config, f"{w.family}/{w.variant}", w.mode, w.shape, snakemake.input.build,
             snakemake.input.validation, snakemake.params.cache_dir, snakemake.output[0])

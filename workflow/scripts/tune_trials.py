from gemmbench import logs
from gemmbench.stages import tune

logs.setup(snakemake.log[0])
w = snakemake.wildcards
tune.trials(snakemake.params.config, f"{w.family}/{w.variant}", w.mode, w.gpu, snakemake.output[0])

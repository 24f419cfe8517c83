from gemmbench import logs
from gemmbench.stages import tune

logs.setup(snakemake.log[0])
w = snakemake.wildcards
tune.compile_checks(snakemake.params.config, f"{w.family}/{w.variant}", w.mode, snakemake.input.timed,
                    snakemake.output[0])

import os

from gemmbench import logs
from gemmbench.run.supervise import BUILDS_NICENESS
from gemmbench.stages import tune

os.nice(BUILDS_NICENESS)  # its compiles, in this process, beside the GPU's job: as a build's (scripts/build.py)
logs.setup(snakemake.log[0])
w = snakemake.wildcards
tune.code(snakemake.params.config, f"{w.family}/{w.variant}", w.mode, snakemake.input.picked, snakemake.output[0])

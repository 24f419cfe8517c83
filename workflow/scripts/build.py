import os

from gemmbench import logs
from gemmbench.run.supervise import BUILDS_NICENESS
from gemmbench.stages import build

# Builds (compiling, with workers of their own) run beside the one job that holds the GPU and is the run's critical
# path; at a lower CPU priority they take only the cores it leaves, so its worker is not starved at start-up.
os.nice(BUILDS_NICENESS)
logs.setup(snakemake.log[0])
w = snakemake.wildcards
build.run(snakemake.params.config, f"{w.family}/{w.variant}", w.mode, snakemake.output[0],
             snakemake.input.get("tuning"))

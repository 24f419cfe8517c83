from pathlib import Path

from gemmbench import logs
from gemmbench.stages import aggregate
from kernels import registry

logs.setup(snakemake.log[0])
registry.load(snakemake.config["variant_modules"])  # they may register workloads the rows name
aggregate.run(build_paths=snakemake.input.builds, validation_paths=snakemake.input.validations,
              bench_paths=snakemake.input.benches, outdir=Path(snakemake.output.summary).parent,
              device_reason=snakemake.params.device_reason)

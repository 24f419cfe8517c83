from pathlib import Path

from gemmbench import logs, tables

logs.setup(snakemake.log[0])
tables.aggregate(build_paths=snakemake.input.builds, validation_paths=snakemake.input.validations,
                 bench_paths=snakemake.input.benches, outdir=Path(snakemake.output.summary).parent,
                 device_reason=snakemake.params.device_reason)

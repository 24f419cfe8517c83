from gemmbench import logs
from gemmbench.stages import aggregate

logs.setup(snakemake.log[0])
aggregate.profile_table(snakemake.input, snakemake.output.csv, snakemake.output.parquet)

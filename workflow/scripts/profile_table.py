from gemmbench import logs
from gemmbench.present import tables

logs.setup(snakemake.log[0])
tables.write_profile(snakemake.input, snakemake.output.csv, snakemake.output.parquet)

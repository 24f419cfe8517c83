from gemmbench import logs, stages

logs.setup(snakemake.log[0])
stages.device_facts(snakemake.params.device, snakemake.params.reason, snakemake.output[0])

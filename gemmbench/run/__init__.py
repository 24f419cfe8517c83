"""Running points: the stage-worker contract (task), the worker process, its watchdog (supervise), one job per
GPU (gpus) and Snakemake's directory lock after a kill (locks)."""

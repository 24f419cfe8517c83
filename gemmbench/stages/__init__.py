"""The pipeline's stages, one module each, as plain functions (`run`): the Snakemake scripts, the GPU jobs
(gemmbench/job.py) and the CLI call them. Each stage writes one JSON file (or table) whose rows cover every
planned point, whatever happened to it.

  tune.py       fastest validated parameters per size class (committed, transferred or searched)
  build.py      compile once per class; the facts of what was built
  measure.py    validate every shape, time every sweep point, keep each row as it arrives
  profile.py    Nsight Compute's counters (optional)
  aggregate.py  the tidy tables (summary, validation, builds, samples, devices)
  plot.py       the figures
  report.py     the HTML report
  common.py     what they share
"""

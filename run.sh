#!/usr/bin/env bash
# Set up (once) and run the main job: `./run.sh` (extra arguments go to snakemake, e.g. ./run.sh --configfile config/cpu.yaml).
# With a GPU it runs the default experiment; without one it runs the CPU families on a small default and says so.
set -euo pipefail
cd "$(dirname "$0")"
if [ ! -x .venv/bin/snakemake ] || [ requirements.txt -nt .venv/.installed ]; then
  python3 -m venv .venv
  .venv/bin/pip install --quiet --upgrade pip
  .venv/bin/pip install --quiet -r requirements.txt
  touch .venv/.installed
fi
exec .venv/bin/snakemake --cores all "$@"

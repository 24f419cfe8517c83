#!/usr/bin/env bash
# Set up (once) and run the main job: `./run.sh` (extra arguments go to snakemake, e.g. ./run.sh --configfile my.yaml).
# With a GPU it runs the default experiment (config/config.yaml); without one, and without a --configfile, the CPU
# default (config/cpu.yaml), and says so. Run it again after an interruption: it continues where the run stopped.
set -euo pipefail
cd "$(dirname "$0")"
if [ ! -x .venv/bin/snakemake ] || [ requirements.txt -nt .venv/.installed ] || [ requirements.lock -nt .venv/.installed ]; then
  python3 -m venv .venv
  .venv/bin/pip install --quiet --upgrade pip
  .venv/bin/pip install --quiet -r requirements.txt -c requirements.lock  # every package at its locked version
  touch .venv/.installed
fi

# The config the run would get (the default, each --configfile over it, each --config item over those) is checked
# here, in one line naming what is wrong, before anything else is said and before Snakemake reads it (its own errors
# are tracebacks).
configs=()
items=()
collecting=""
for arg in "$@"; do
  case "$arg" in
    --configfile | --configfiles) collecting=files ;;
    --configfile=* | --configfiles=*) configs+=("${arg#*=}"); collecting="" ;;
    --config) collecting=items ;;
    --config=*) items+=("${arg#*=}"); collecting=items ;;
    -*) collecting="" ;;
    *) if [ "$collecting" = files ]; then configs+=("$arg"); elif [ "$collecting" = items ]; then items+=("$arg"); fi ;;
  esac
done

default=()
if [ ${#configs[@]} -eq 0 ] && ! .venv/bin/python -c "from gemmbench.plan import gpu_count; exit(gpu_count() == 0)"; then
  default=(--configfile config/cpu.yaml)
  configs=(config/cpu.yaml)
fi
.venv/bin/python -m gemmbench check-config "${configs[@]}" ${items[@]+--config "${items[@]}"} || exit 2

if [ ${#default[@]} -gt 0 ]; then
  doing="running"
  for arg in "$@"; do case "$arg" in -n | --dry-run | --dryrun) doing="planning, in a dry run that runs nothing," ;; esac; done
  echo "========================================================================================" >&2
  echo "  NO GPU VISIBLE: $doing the CPU default (config/cpu.yaml): the CPU families" >&2
  echo "  at sizes a CPU finishes in a few minutes. On a GPU box the same command runs config/config.yaml." >&2
  echo "========================================================================================" >&2
fi
exec .venv/bin/snakemake --cores all "${default[@]}" "$@"

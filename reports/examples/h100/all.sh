#!/usr/bin/env bash
# On the node, after the unpack, in /tmp/w (a copy of the tree). Steps in the order given as arguments:
#   pair  - two default runs from nothing, each with its no-change rerun
#   one   - one default run from nothing and its no-change rerun
#   first - in a second copy, this GPU's records removed and tune.transfer false: a first run without records and
#           its no-change rerun
set -u
export PYTHONPATH=/tmp/gpu-node/site:/tmp/w PATH=/tmp/gpu-node/site/bin:$PATH CUDA_PATH=/usr/local/cuda PYTHONUNBUFFERED=1
out=/tmp/w/.dev/out; mkdir -p $out
nvidia-smi --query-gpu=uuid,name,driver_version,power.limit,clocks.max.sm --format=csv > $out/gpu.txt
stamp() { python -c "import time; print(round(time.time() - $1, 1))"; }
rm -rf /tmp/f && mkdir /tmp/f && tar cf - . | tar xf - -C /tmp/f
s=$(date +%s.%N); python -m compileall -q -j 0 /tmp/gpu-node/site > /dev/null 2>&1
echo "compileall rc=$? wall $(stamp $s) s" >> $out/walls.txt
pip list 2>/dev/null | grep -iE "cupy|numba|tvm|snakemake |nvidia-cuda-nvrtc|numpy " > $out/versions.txt
default_run() {
  cd /tmp/w && rm -rf results reports/report.html .snakemake
  s=$(date +%s.%N); python -m snakemake --cores all > $out/run$1.log 2>&1
  echo "run$1 rc=$? wall $(stamp $s) s" >> $out/walls.txt
  tar czf $out/run$1.tgz results/tables results/benchmarks results/logs/measure reports/report.html 2>/dev/null
  s=$(date +%s.%N); python -m snakemake --cores all > $out/nochange$1.log 2>&1
  echo "nochange$1 rc=$? wall $(stamp $s) s" >> $out/walls.txt
}
first_run() {
  cd /tmp/f && export PYTHONPATH=/tmp/gpu-node/site:/tmp/f
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr 'A-Z ' 'a-z-')
  ls -d resources/tuning/$gpu >> $out/walls.txt && rm -rf resources/tuning/$gpu
  s=$(date +%s.%N); python -m snakemake --cores all --configfile config/config.yaml .dev/s28/search.yaml > $out/first.log 2>&1
  echo "first rc=$? wall $(stamp $s) s" >> $out/walls.txt
  tar czf $out/first.tgz results/tables results/benchmarks results/logs results/tune resources/tuning reports/report.html 2>/dev/null
  s=$(date +%s.%N); python -m snakemake --cores all --configfile config/config.yaml .dev/s28/search.yaml > $out/nochangef.log 2>&1
  echo "nochange-first rc=$? wall $(stamp $s) s" >> $out/walls.txt
  export PYTHONPATH=/tmp/gpu-node/site:/tmp/w
}
n=0
for step in "$@"; do
  case $step in
    pair) default_run $((n+1)); default_run $((n+2)); n=$((n+2));;
    one) default_run $((n+1)); n=$((n+1));;
    first) first_run;;
  esac
done
echo finished >> $out/walls.txt

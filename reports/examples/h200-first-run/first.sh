#!/usr/bin/env bash
# On the node, in a copy of the tree, after the unpack: the default run as on a GPU model with no tuning records (the
# H200's removed in the copy, tune.transfer false), in one piece; a no-change rerun; then each class whose pick
# differs from the committed record's, both picks timed in this sitting (compare_picks.py).
set -u
export PYTHONPATH=/tmp/gpu-node/site:$PWD PATH=/tmp/gpu-node/site/bin:$PATH CUDA_PATH=/usr/local/cuda PYTHONUNBUFFERED=1
out=.dev/out; mkdir -p $out
nvidia-smi --query-gpu=uuid,name,driver_version,power.limit,clocks.max.sm --format=csv > $out/gpu.txt
stamp() { python -c "import time; print(round(time.time() - $1, 1))"; }
s=$(date +%s.%N); python -m compileall -q -j 0 /tmp/gpu-node/site > /dev/null 2>&1
echo "compileall rc=$? wall $(stamp $s) s" >> $out/walls.txt
pip list 2>/dev/null | grep -iE "cupy|numba|tvm|snakemake |nvidia-cuda-nvrtc|numpy " > $out/versions.txt
rm -rf /tmp/committed-h200 && cp -r resources/tuning/nvidia-h200 /tmp/committed-h200 && rm -rf resources/tuning/nvidia-h200
s=$(date +%s.%N); python -m snakemake --cores all --configfile config/config.yaml .dev/s25/search.yaml > $out/first.log 2>&1
echo "first rc=$? wall $(stamp $s) s" >> $out/walls.txt
tar czf $out/first.tgz results/tables results/benchmarks results/logs results/tune reports/report.html $out/first.log 2>/dev/null
s=$(date +%s.%N); python -m snakemake --cores all --configfile config/config.yaml .dev/s25/search.yaml > $out/nochange.log 2>&1
echo "nochange rc=$? wall $(stamp $s) s" >> $out/walls.txt
s=$(date +%s.%N); python .dev/s25/compare_picks.py /tmp/committed-h200 $out/compare.csv > $out/compare.log 2>&1
echo "compare rc=$? wall $(stamp $s) s" >> $out/walls.txt
echo finished >> $out/walls.txt

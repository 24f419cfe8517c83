#!/usr/bin/env bash
# On the node, in a copy of the tree, after the unpack: the default run from nothing, and its no-change rerun.
export PYTHONPATH=/tmp/gpu-node/site:$PWD PATH=/tmp/gpu-node/site/bin:$PATH CUDA_PATH=/usr/local/cuda PYTHONUNBUFFERED=1
out=.dev/out; mkdir -p $out
nvidia-smi --query-gpu=uuid,name,driver_version,power.limit,clocks.max.sm --format=csv > $out/gpu.txt
stamp() { python -c "import time; print(round(time.time() - $1, 1))"; }
s=$(date +%s.%N); python -m compileall -q -j 0 /tmp/gpu-node/site > /dev/null 2>&1
echo "compileall rc=$? wall $(stamp $s) s" >> $out/walls.txt
pip list 2>/dev/null | grep -iE "cupy|numba|tvm|snakemake |nvidia-cuda-nvrtc|numpy " > $out/versions.txt
s=$(date +%s.%N); python -m snakemake --cores all > $out/run1.log 2>&1
echo "run1 rc=$? wall $(stamp $s) s" >> $out/walls.txt
tar czf $out/run1.tgz results/tables results/benchmarks results/logs/measure reports/report.html $out/run1.log 2>/dev/null
s=$(date +%s.%N); python -m snakemake --cores all > $out/nochange1.log 2>&1
echo "nochange1 rc=$? wall $(stamp $s) s" >> $out/walls.txt
echo finished >> $out/walls.txt

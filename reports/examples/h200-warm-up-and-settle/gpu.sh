#!/usr/bin/env bash
# On the node, in a copy of the tree, after the unpack: one default run from nothing and a no-change rerun.
# Everything that comes back is under .dev/out.
set -u
export PYTHONPATH=/tmp/gpu-node/site:$PWD PATH=/tmp/gpu-node/site/bin:$PATH CUDA_PATH=/usr/local/cuda PYTHONUNBUFFERED=1
out=.dev/out; mkdir -p $out
nvidia-smi --query-gpu=uuid,name,driver_version,power.limit,clocks.max.sm --format=csv > $out/gpu.txt
stamp() { python -c "import time; print(round(time.time() - $1, 1))"; }
pip list 2>/dev/null | grep -iE "cupy|numba|tvm|snakemake |nvidia-cuda-nvrtc" > $out/versions.txt
s=$(date +%s.%N); python -m snakemake --cores all > $out/run1.log 2>&1; echo "run1 rc=$? wall $(stamp $s) s" >> $out/walls.txt
s=$(date +%s.%N); python -m snakemake --cores all > $out/nochange.log 2>&1; echo "nochange rc=$? wall $(stamp $s) s" >> $out/walls.txt
tar czf - results/tables results/benchmarks results/build results/logs reports/report.html $out/*.log \
  $out/walls.txt $out/gpu.txt $out/versions.txt 2>/dev/null | split -b 15M - $out/run1.tgz.

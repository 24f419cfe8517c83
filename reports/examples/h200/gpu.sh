#!/usr/bin/env bash
# On the node, in a copy of the tree, after the unpack: two default runs from nothing with a no-change rerun after
# the first, then the GPU tests one at a time. Everything that comes back is under .dev/out.
set -u
export PYTHONPATH=/tmp/gpu-node/site:$PWD PATH=/tmp/gpu-node/site/bin:$PATH CUDA_PATH=/usr/local/cuda PYTHONUNBUFFERED=1
out=.dev/out; mkdir -p $out
nvidia-smi --query-gpu=uuid,name,driver_version,power.limit,clocks.max.sm --format=csv > $out/gpu.txt
stamp() { python -c "import time; print(round(time.time() - $1, 1))"; }
run() { local s; s=$(date +%s.%N); python -m snakemake --cores all > $out/$1.log 2>&1; echo "$1 rc=$? wall $(stamp $s) s" >> $out/walls.txt; }
keep() { tar czf - results/tables results/benchmarks results/build results/tune results/logs reports/report.html \
           $out/*.log $out/walls.txt $out/gpu.txt 2>/dev/null | split -b 15M - $out/$1.tgz.; }
pip list 2>/dev/null | grep -iE "cupy|numba|tvm|snakemake |nvidia-cuda-nvrtc" > $out/versions.txt
run run1
run nochange
keep run1
rm -rf results .snakemake reports/report.html reports/figures
run run2
keep run2
timeout 420 python -m pytest tests/test_gpu.py tests/test_resident.py -n 0 -rfE -q -p no:cacheprovider > $out/gputests.log 2>&1
echo "gputests rc=$?" >> $out/walls.txt

#!/usr/bin/env bash
# On the node, in a copy of the tree, after the unpack: bytecode for the unpacked site-packages (as pip install
# writes it), the b2b rungs' GPU test, the short-kernel placement probe, a default run and a no-change rerun, then a
# second default run from nothing and its no-change rerun. Each stage's outputs are tarred under .dev/out as it ends.
set -u
export PYTHONPATH=/tmp/gpu-node/site:$PWD PATH=/tmp/gpu-node/site/bin:$PATH CUDA_PATH=/usr/local/cuda PYTHONUNBUFFERED=1
out=.dev/out; mkdir -p $out
nvidia-smi --query-gpu=uuid,name,driver_version,power.limit,clocks.max.sm --format=csv > $out/gpu.txt
stamp() { python -c "import time; print(round(time.time() - $1, 1))"; }
s=$(date +%s.%N); python -m compileall -q -j 0 /tmp/gpu-node/site > $out/compileall.log 2>&1
echo "compileall rc=$? wall $(stamp $s) s" >> $out/walls.txt
pip list 2>/dev/null | grep -iE "cupy|numba|tvm|snakemake |nvidia-cuda-nvrtc|numpy " > $out/versions.txt
s=$(date +%s.%N); python -m pytest tests/test_gpu.py -n 0 -q -p no:cacheprovider -k "b2b" > $out/gpu-tests.txt 2>&1
echo "gputests rc=$? wall $(stamp $s) s" >> $out/walls.txt
s=$(date +%s.%N); OUT=$out python .dev/s21/placement.py > $out/placement.log 2>&1
echo "placement rc=$? wall $(stamp $s) s" >> $out/walls.txt
s=$(date +%s.%N); python -m snakemake --cores all > $out/run1.log 2>&1; echo "run1 rc=$? wall $(stamp $s) s" >> $out/walls.txt
s=$(date +%s.%N); python -m snakemake --cores all > $out/nochange.log 2>&1; echo "nochange rc=$? wall $(stamp $s) s" >> $out/walls.txt
tar czf - results/tables results/benchmarks results/build results/logs results/tune reports/report.html \
  $out/*.log $out/*.jsonl $out/walls.txt $out/gpu.txt $out/versions.txt $out/gpu-tests.txt 2>/dev/null | split -b 15M - $out/run1.tgz.
mkdir -p /tmp/run1 && mv results .snakemake reports/report.html /tmp/run1/
s=$(date +%s.%N); python -m snakemake --cores all > $out/run2.log 2>&1; echo "run2 rc=$? wall $(stamp $s) s" >> $out/walls.txt
s=$(date +%s.%N); python -m snakemake --cores all > $out/nochange2.log 2>&1; echo "nochange2 rc=$? wall $(stamp $s) s" >> $out/walls.txt
tar czf - results/tables results/benchmarks results/build results/logs reports/report.html \
  $out/run2.log $out/nochange2.log $out/walls.txt 2>/dev/null | split -b 15M - $out/run2.tgz.
echo finished >> $out/walls.txt

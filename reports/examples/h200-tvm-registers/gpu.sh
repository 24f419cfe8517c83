#!/usr/bin/env bash
# On the node, in a copy of the tree, after the unpack. (1) TVM 08 as on main before the merge (its committed record)
# against cuBLAS TF32, then 08 with the fragment offsets (record stale: searched), same config; the new record goes to
# resources/tuning. (2) 08's GPU test. (3) Two default runs of the final tree, each with a no-change rerun.
set -u
export PYTHONPATH=/tmp/gpu-node/site:$PWD PATH=/tmp/gpu-node/site/bin:$PATH CUDA_PATH=/usr/local/cuda PYTHONUNBUFFERED=1
out=.dev/out; mkdir -p $out
nvidia-smi --query-gpu=uuid,name,driver_version,power.limit,clocks.max.sm --format=csv > $out/gpu.txt
stamp() { python -c "import time; print(round(time.time() - $1, 1))"; }
s=$(date +%s.%N); python -m compileall -q -j 0 /tmp/gpu-node/site > $out/compileall.log 2>&1
echo "compileall rc=$? wall $(stamp $s) s" >> $out/walls.txt
pip list 2>/dev/null | grep -iE "cupy|numba|tvm|snakemake |nvidia-cuda-nvrtc|numpy " > $out/versions.txt
record=resources/tuning/nvidia-h200/tvm/08_tirx_registers/tf32.json
cp kernels/tvm/08_tirx_registers.py /tmp/08_after.py
cp .dev/s22/08_before.py kernels/tvm/08_tirx_registers.py
s=$(date +%s.%N); python -m snakemake --cores all --configfile .dev/s22/t08.yaml > $out/t08-before.log 2>&1
echo "t08-before rc=$? wall $(stamp $s) s" >> $out/walls.txt
mkdir -p $out/t08-before && cp results/tables/summary.csv results/tables/validation.csv $out/t08-before/
rm -rf results .snakemake; cp /tmp/08_after.py kernels/tvm/08_tirx_registers.py
s=$(date +%s.%N); python -m snakemake --cores all --configfile .dev/s22/t08.yaml > $out/t08-after.log 2>&1
echo "t08-after rc=$? wall $(stamp $s) s" >> $out/walls.txt
mkdir -p $out/t08-after && cp results/tables/summary.csv results/tables/validation.csv results/tables/builds.csv $out/t08-after/
cp -r results/tune results/logs results/benchmarks $out/t08-after/ 2>/dev/null
cp results/tune/nvidia-h200/tvm/08_tirx_registers/tf32.json $record && cp $record $out/t08-after/record.json
rm -rf results .snakemake
s=$(date +%s.%N); python -m pytest tests/test_gpu.py -n 0 -q -p no:cacheprovider -k "08_tirx_registers" > $out/gpu-tests.txt 2>&1
echo "gputests rc=$? wall $(stamp $s) s" >> $out/walls.txt
tar czf $out/t08.tgz $out/t08-before $out/t08-after $out/*.log $out/gpu-tests.txt $out/walls.txt $out/gpu.txt $out/versions.txt
s=$(date +%s.%N); python -m snakemake --cores all > $out/run1.log 2>&1; echo "run1 rc=$? wall $(stamp $s) s" >> $out/walls.txt
s=$(date +%s.%N); python -m snakemake --cores all > $out/nochange.log 2>&1; echo "nochange rc=$? wall $(stamp $s) s" >> $out/walls.txt
tar czf - results/tables results/benchmarks results/build results/logs results/tune reports/report.html \
  $out/run1.log $out/nochange.log $out/walls.txt 2>/dev/null | split -b 15M - $out/run1.tgz.
mkdir -p /tmp/run1 && mv results .snakemake reports/report.html /tmp/run1/
s=$(date +%s.%N); python -m snakemake --cores all > $out/run2.log 2>&1; echo "run2 rc=$? wall $(stamp $s) s" >> $out/walls.txt
s=$(date +%s.%N); python -m snakemake --cores all > $out/nochange2.log 2>&1; echo "nochange2 rc=$? wall $(stamp $s) s" >> $out/walls.txt
tar czf - results/tables results/benchmarks results/build results/logs reports/report.html \
  $out/run2.log $out/nochange2.log $out/walls.txt 2>/dev/null | split -b 15M - $out/run2.tgz.
echo finished >> $out/walls.txt

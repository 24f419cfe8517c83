#!/usr/bin/env bash
# On the node, in a copy of the tree, after the unpack: the new GPU tests (the scale on the tensor cores, rung 07 in
# both modes), rung 07's TF32 search (the tune stage alone), a default run and a no-change rerun, then a second
# default run from nothing with the TF32 record committed as it will be, then the planted GPU controls.
# Each stage's outputs are tarred under .dev/out as soon as it ends.
set -u
export PYTHONPATH=/tmp/gpu-node/site:$PWD PATH=/tmp/gpu-node/site/bin:$PATH CUDA_PATH=/usr/local/cuda PYTHONUNBUFFERED=1
out=.dev/out; mkdir -p $out
nvidia-smi --query-gpu=uuid,name,driver_version,power.limit,clocks.max.sm --format=csv > $out/gpu.txt
stamp() { python -c "import time; print(round(time.time() - $1, 1))"; }
pip list 2>/dev/null | grep -iE "cupy|numba|tvm|snakemake |nvidia-cuda-nvrtc|numpy " > $out/versions.txt
s=$(date +%s.%N); python -m pytest tests/test_gpu.py -n 0 -q -p no:cacheprovider -k "scale_from_the_tensor_cores or 07_tirx" > $out/gpu-tests.txt 2>&1
echo "gputests rc=$? wall $(stamp $s) s" >> $out/walls.txt
s=$(date +%s.%N); python -m snakemake --cores all --until tune > $out/tune.log 2>&1; echo "tune rc=$? wall $(stamp $s) s" >> $out/walls.txt
tar czf $out/tune.tgz results/tune results/logs results/benchmarks $out/tune.log $out/gpu-tests.txt $out/walls.txt 2>/dev/null
s=$(date +%s.%N); python -m snakemake --cores all > $out/run1.log 2>&1; echo "run1 rc=$? wall $(stamp $s) s" >> $out/walls.txt
s=$(date +%s.%N); python -m snakemake --cores all > $out/nochange.log 2>&1; echo "nochange rc=$? wall $(stamp $s) s" >> $out/walls.txt
tar czf - results/tables results/benchmarks results/build results/logs results/tune reports/report.html \
  $out/*.log $out/walls.txt $out/gpu.txt $out/versions.txt $out/gpu-tests.txt 2>/dev/null | split -b 15M - $out/run1.tgz.
record=resources/tuning/nvidia-h200/tvm/07_tirx_wgmma/tf32.json
mkdir -p $(dirname $record) && cp results/tune/nvidia-h200/tvm/07_tirx_wgmma/tf32.json $record
mkdir -p /tmp/run1 && mv results .snakemake reports/report.html /tmp/run1/
s=$(date +%s.%N); python -m snakemake --cores all > $out/run2.log 2>&1; echo "run2 rc=$? wall $(stamp $s) s" >> $out/walls.txt
s=$(date +%s.%N); python -m snakemake --cores all > $out/nochange2.log 2>&1; echo "nochange2 rc=$? wall $(stamp $s) s" >> $out/walls.txt
tar czf - results/tables results/benchmarks results/build results/logs reports/report.html \
  $out/run2.log $out/nochange2.log $out/walls.txt 2>/dev/null | split -b 15M - $out/run2.tgz.
s=$(date +%s.%N); timeout 240 python -m pytest tests/test_gpu.py -n 0 -q -p no:cacheprovider -k "planted or cheat or control or bf16_pieces or waits_on_the_device" > $out/gpu-controls.txt 2>&1
echo "controls rc=$? wall $(stamp $s) s" >> $out/walls.txt
echo finished >> $out/walls.txt

#!/usr/bin/env bash
# On the node after the unpack, in /tmp/w: two TVM searches specialised per shape (tune_trials, tune_check_compile,
# then tune), their H100 records removed, with this tree.
set -u
out=/tmp/w/.dev/out3; mkdir -p $out
export PATH=/tmp/gpu-node/site/bin:$PATH CUDA_PATH=/usr/local/cuda PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/gpu-node/site:/tmp/w
nvidia-smi --query-gpu=uuid,name,driver_version,power.limit,clocks.max.sm --format=csv > $out/gpu.txt
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr 'A-Z ' 'a-z-')
python -m compileall -q -j 0 /tmp/gpu-node/site > /dev/null 2>&1
cd /tmp/w && rm -rf results .snakemake
targets=""
for v in tvm/08_tirx_registers/tf32 tvm/02_d2l_vectorized/fp32; do
  rm -f resources/tuning/$gpu/$v.json; targets="$targets results/tune/$gpu/$v.picked.json"
done
s=$(date +%s.%N)
python -m snakemake $targets --cores all --configfile config/config.yaml .dev/s28/search.yaml > $out/tvm.log 2>&1
echo "tvm rc=$? wall $(python -c "import time; print(round(time.time() - $s, 1))") s" >> $out/walls.txt
grep -h "process started\|lookup took\|trials.*timed in\|searching" results/logs/tune*/*/*/*/*.log > $out/stamps.txt
tar czf $out/tvm.tgz results/logs results/benchmarks results/tune 2>/dev/null
echo finished >> $out/walls.txt

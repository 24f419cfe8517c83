#!/usr/bin/env bash
# On the node after the unpack: the worker's facts against the job's own (new tree), then the same six searches in
# the tree before the change (old: 9269fe6) and after it (new), one tree after the other.
set -u
out=/tmp/w/.dev/out; mkdir -p $out
export PATH=/tmp/gpu-node/site/bin:$PATH CUDA_PATH=/usr/local/cuda PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=uuid,name,driver_version,power.limit,clocks.max.sm --format=csv > $out/gpu.txt
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr 'A-Z ' 'a-z-')
python -m compileall -q -j 0 /tmp/gpu-node/site > /dev/null 2>&1
rm -rf /tmp/old && cp -r /tmp/w/.dev/s32/old /tmp/old
cd /tmp/w && PYTHONPATH=/tmp/gpu-node/site:/tmp/w python .dev/s32/facts.py > $out/facts.txt 2>&1
for tree in old w; do
  cd /tmp/$tree && rm -rf results .snakemake
  targets=""
  for v in cupy/03_smem_tiles/fp32 cupy/04_rect_tiles/fp32 cupy/tc02_ldmatrix/bf16 cupy/tc05_tma/bf16 \
           cupy/tc07_registers/tf32 cupy/tc09_registers_tma_store/tf32; do
    rm -f resources/tuning/$gpu/$v.json; targets="$targets results/tune/$gpu/$v.picked.json"
  done
  s=$(date +%s.%N)
  PYTHONPATH=/tmp/gpu-node/site:/tmp/$tree python -m snakemake $targets --cores all --configfile config/config.yaml \
    /tmp/w/.dev/s28/search.yaml > $out/$tree.log 2>&1
  echo "$tree rc=$? wall $(python -c "import time; print(round(time.time() - $s, 1))") s" >> $out/walls.txt
  tar czf $out/$tree.tgz results/logs results/benchmarks results/tune 2>/dev/null
done
echo finished >> $out/walls.txt

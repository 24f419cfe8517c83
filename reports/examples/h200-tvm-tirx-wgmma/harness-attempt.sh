#!/usr/bin/env bash
# On the node after the unpack: rung 07's GPU test, then a default-style run of cuBLAS, tc05 and 07 in BF16.
set -u
export PYTHONPATH=/tmp/gpu-node/site:$PWD PATH=/tmp/gpu-node/site/bin:$PATH CUDA_PATH=/usr/local/cuda PYTHONUNBUFFERED=1
out=.dev/out; mkdir -p $out
nvidia-smi --query-gpu=uuid,name,driver_version,power.limit --format=csv > $out/gpu.txt
python -m pytest tests/test_gpu.py -n 0 -q -p no:cacheprovider -k "07_tirx" > $out/gpu-tests.txt 2>&1; echo "gputests rc=$?" >> $out/walls.txt
s=$(date +%s.%N); python -m snakemake --cores all --config 'families=[cublas,tvm,cupy]' \
  'variants=[cublas/gemm,tvm/07_tirx_wgmma,cupy/tc05_tma]' 'modes=[bf16]' 'square_sizes=[1024,4096,8192,16384]' > $out/run.log 2>&1
echo "run rc=$? wall $(python -c "import time; print(round(time.time() - $s, 1))") s" >> $out/walls.txt
tar czf $out/run.tgz results/tables results/build results/logs reports/report.html $out/*.txt $out/run.log 2>/dev/null

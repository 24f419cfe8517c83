#!/usr/bin/env bash
# On the node, after the unpack, in /tmp/w (a copy of the tree): test_gpu.py's planted GPU controls and cheats, in
# the README's environment, one test after the other (-n 0: timing controls share no GPU with each other).
set -u
export PYTHONPATH=/tmp/gpu-node/site:/tmp/w PATH=/tmp/gpu-node/site/bin:$PATH CUDA_PATH=/usr/local/cuda PYTHONUNBUFFERED=1
out=/tmp/w/.dev/out; mkdir -p $out; cd /tmp/w
nvidia-smi --query-gpu=uuid,name,driver_version,power.limit,clocks.max.sm --format=csv > $out/gpu.txt
stamp() { python -c "import time; print(round(time.time() - $1, 1))"; }
s=$(date +%s.%N); python -m compileall -q -j 0 /tmp/gpu-node/site > /dev/null 2>&1
echo "compileall rc=$? wall $(stamp $s) s" >> $out/walls.txt
pip list 2>/dev/null | grep -iE "cupy|numba|tvm|snakemake |nvidia-cuda-nvrtc|numpy |pytest" > $out/versions.txt
s=$(date +%s.%N)
python -m pytest tests/test_gpu.py -n 0 -v -p no:cacheprovider --durations=10 \
  -k "planted or fp32_product or after_a_gpu_control or cannot_hit" > $out/gpu-controls.txt 2>&1
echo "controls rc=$? wall $(stamp $s) s" >> $out/walls.txt
echo finished >> $out/walls.txt

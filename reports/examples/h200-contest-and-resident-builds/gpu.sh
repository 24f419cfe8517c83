#!/usr/bin/env bash
# On the node, in the repo root, after the unpack: 04's contest on this GPU (seeded from the H100's record), then a
# default run from nothing, then a no-change rerun. Everything that comes back is under .dev/out.
set -u
export PYTHONPATH=/tmp/gpu-node/site:$PWD PATH=/tmp/gpu-node/site/bin:$PATH CUDA_PATH=/usr/local/cuda PYTHONUNBUFFERED=1
out=.dev/out; mkdir -p $out
nvidia-smi --query-gpu=uuid,name,driver_version,power.limit,clocks.max.sm --format=csv > $out/gpu.txt
stamp() { python -c "import time; print(round(time.time() - $1, 1))"; }
d=resources/tuning/nvidia-h200/tvm/04_metaschedule
mkdir -p $d
python - <<'PY'
import json
r = json.load(open("resources/tuning/nvidia-h100-80gb-hbm3/tvm/04_metaschedule/fp32.json"))
r["key"] = "seed-only:" + r["key"]  # seeds the search here; stands for nothing
json.dump(r, open("resources/tuning/nvidia-h200/tvm/04_metaschedule/fp32.json", "w"))
PY
s=$(date +%s.%N)
python -m snakemake --cores all results/tune/nvidia-h200/tvm/04_metaschedule/fp32.json \
  --configfile config/config.yaml .dev/s14/seed04.yaml > $out/tune04.log 2>&1
echo "tune04 rc=$? wall $(stamp $s) s" >> $out/walls.txt
cp results/tune/nvidia-h200/tvm/04_metaschedule/fp32.json $d/fp32.json
cp results/tune/nvidia-h200/tvm/04_metaschedule/fp32.json $out/tune04-fp32.json
tar czf $out/tune04-dir.tgz results/tune/nvidia-h200/tvm/04_metaschedule results/logs 2>/dev/null
rm -rf results .snakemake
s=$(date +%s.%N)
python -m snakemake --cores all > $out/run1.log 2>&1
echo "run1 rc=$? wall $(stamp $s) s" >> $out/walls.txt
s=$(date +%s.%N)
python -m snakemake --cores all > $out/nochange.log 2>&1
echo "nochange rc=$? wall $(stamp $s) s" >> $out/walls.txt
pip list 2>/dev/null | grep -iE "cupy|numba|tvm|snakemake |nvidia-cuda-nvrtc" > $out/versions.txt
tar czf $out/run1.tgz results/tables results/benchmarks results/tune results/build reports/report.html \
  results/logs $out/*.log $out/walls.txt $out/gpu.txt $out/versions.txt $out/tune04-fp32.json 2>/dev/null

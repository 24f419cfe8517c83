#!/usr/bin/env bash
# A default run (snakemake --cores all) timed, a no-change rerun, and its slow samples counted per point.
set -u
export PYTHONPATH=/tmp/gpu-node/site:$PWD PATH=/tmp/gpu-node/site/bin:$PATH CUDA_PATH=/usr/local/cuda PYTHONUNBUFFERED=1
rm -rf results reports/report.html reports/figures
mkdir -p /tmp/sr
nvidia-smi --query-gpu=name,uuid,driver_version,power.limit --format=csv > /tmp/sr/gpu.txt
start=$(date +%s.%N)
python -m snakemake --cores all > /tmp/sr/run1.log 2>&1; rc=$?
end=$(date +%s.%N)
echo "run1 rc=$rc wall $(python3 -c "print(f'{$end - $start:.1f}')") s" > /tmp/sr/walls.txt
start=$(date +%s.%N)
python -m snakemake --cores all > /tmp/sr/nochange.log 2>&1; rc=$?
end=$(date +%s.%N)
echo "nochange rc=$rc wall $(python3 -c "print(f'{$end - $start:.1f}')") s" >> /tmp/sr/walls.txt
python .dev/slowcount.py results > /tmp/sr/slow.txt 2>&1
cp results/tables/summary.csv results/tables/validation.csv results/tables/builds.csv results/tables/devices.json reports/report.html /tmp/sr/ 2>/dev/null
tar czf /tmp/sr.tgz -C /tmp sr
echo done > /tmp/sr/done

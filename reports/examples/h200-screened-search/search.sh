#!/usr/bin/env bash
# On the node, in a copy of the tree, after the unpack: five searches as on a GPU model with no records (the H200's
# removed in the copy, tune.transfer false), first screening (the default finalists), then every candidate in full
# (finalists 0); each round's tune results, logs and Snakemake benchmark files kept.
set -u
export PYTHONPATH=/tmp/gpu-node/site:$PWD PATH=/tmp/gpu-node/site/bin:$PATH CUDA_PATH=/usr/local/cuda PYTHONUNBUFFERED=1
out=.dev/out2; mkdir -p $out
nvidia-smi --query-gpu=uuid,name,driver_version,power.limit,clocks.max.sm --format=csv > $out/gpu.txt
stamp() { python -c "import time; print(round(time.time() - $1, 1))"; }
python -m compileall -q -j 0 /tmp/gpu-node/site > /dev/null 2>&1
rm -rf resources/tuning/nvidia-h200
T=$(cat .dev/s22/targets.txt)
for round in screen full; do
  extra=""; [ $round = full ] && extra=.dev/s22/full.yaml
  s=$(date +%s.%N); python -m snakemake --cores all $T --configfile .dev/s22/search.yaml $extra > $out/$round.log 2>&1
  echo "$round rc=$? wall $(stamp $s) s" >> $out/walls.txt
  mkdir -p $out/$round && mv results/tune results/logs results/benchmarks $out/$round/ && rm -rf .snakemake
done
tar czf $out/search.tgz $out/screen $out/full $out/*.log $out/walls.txt $out/gpu.txt
echo finished >> $out/walls.txt

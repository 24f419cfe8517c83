#!/usr/bin/env bash
# A newcomer's first hour on a fresh clone (no GPU, this 2-core box): ./run.sh, the bad-input cases, a kill -9, ./test.sh.
set -u
out=$1; rm -rf /tmp/fh; git clone -q /work/main /tmp/fh; cd /tmp/fh
log() { echo "\$ $*" >> "$out/cases.txt"; }
: > "$out/cases.txt"
echo "commit $(git rev-parse --short HEAD), $(nproc) cores, $(date -u +%FT%TZ)" > "$out/walls.txt"
s=$(date +%s); ./run.sh > "$out/run.log" 2>&1; rc=$?; echo "run.sh rc=$rc wall $(( $(date +%s) - s )) s (fresh clone: venv set up, then the CPU default)" >> "$out/walls.txt"
s=$(date +%s); ./run.sh > "$out/run-again.log" 2>&1; rc=$?; echo "run.sh again rc=$rc wall $(( $(date +%s) - s )) s (nothing changed)" >> "$out/walls.txt"
printf 'square_sizes: [256]\nsquare_sizs: [512]\n' > /tmp/unknown-key.yaml
printf 'timing: {min_samples: -3}\n' > /tmp/bad-value.yaml
for args in "--configfile /tmp/unknown-key.yaml" "--configfile /tmp/bad-value.yaml" "--configfile /tmp/missing.yaml" \
            "--config square_sizes=[abc]" "--config timing={min_samples:0}" "--config nosuchkey=1" "--config modes=[fp64]" \
            "--config families=[nosuchfamily]" "-n"; do
  log "./run.sh $args"; ./run.sh $args >> "$out/cases.txt" 2>&1; echo "(exit $?)" >> "$out/cases.txt"; echo >> "$out/cases.txt"
done
log ".venv/bin/python -m gemmbench check-config /tmp/unknown-key.yaml"; .venv/bin/python -m gemmbench check-config /tmp/unknown-key.yaml >> "$out/cases.txt" 2>&1; echo "(exit $?)" >> "$out/cases.txt"; echo >> "$out/cases.txt"
# kill -9 of a run in the middle of its measure jobs: what it leaves behind
rm -rf results; before=$(ls /tmp/gemmbench-workers-$(id -u) 2>/dev/null | wc -l)
log "./run.sh & (results removed); kill -9 of the whole run after 60 s; then 45 s later, what is left"
setsid ./run.sh > "$out/killed.log" 2>&1 & pid=$!; sleep 60; kill -9 -- -$pid; sleep 45
{ echo "files under /tmp/gemmbench-workers-$(id -u) before the run: $before; after the kill:"; ls -la /tmp/gemmbench-workers-$(id -u) 2>&1; echo "worker processes left:"; pgrep -af "gemmbench.run.worker" || echo none; echo "tracebacks in worker logs:"; grep -l Traceback /tmp/gemmbench-workers-$(id -u)/*.log 2>/dev/null || echo none; } >> "$out/cases.txt" 2>&1
log "./run.sh (again, after the kill: it continues)"; s=$(date +%s); ./run.sh > "$out/after-kill.log" 2>&1; echo "(exit $?, $(( $(date +%s) - s )) s)" >> "$out/cases.txt"; tail -3 "$out/after-kill.log" >> "$out/cases.txt"
s=$(date +%s); ./test.sh > "$out/test.log" 2>&1; rc=$?; echo "test.sh rc=$rc wall $(( $(date +%s) - s )) s" >> "$out/walls.txt"
tail -3 "$out/test.log" >> "$out/walls.txt"
echo done > "$out/done"

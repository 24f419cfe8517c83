#!/usr/bin/env bash
# Every bad-input case of issue 50 on a fresh clone of HEAD (its venv borrowed from /tmp/fh), then a kill -9 mid-run.
set -u
out=$1; rm -rf /tmp/fh2; git clone -q /work/main /tmp/fh2; cd /tmp/fh2; ln -s /tmp/fh/.venv .venv; touch .venv/.installed
: > "$out/cases.txt"
echo "commit $(git rev-parse --short HEAD), $(nproc) cores, $(date -u +%FT%TZ)" >> "$out/cases.txt"; echo >> "$out/cases.txt"
./run.sh -n > /dev/null 2>&1  # the borrowed venv brought up to date first (quietly)
printf 'square_sizes: [256]\nsquare_sizs: [512]\n' > /tmp/unknown-key.yaml
printf 'timing: {min_samples: -3}\n' > /tmp/bad-value.yaml
printf 'timing: [1, 2\n' > /tmp/bad-yaml.yaml
for args in "--configfile /tmp/unknown-key.yaml" "--configfile /tmp/bad-value.yaml" "--configfile /tmp/bad-yaml.yaml" \
            "--configfile /tmp/missing.yaml" "--config square_sizes=[abc]" "--config timing={min_samples: 0}" \
            "--config nosuchkey=1" "--config modes=[fp64]" "--config families=[nosuchfamily]" \
            "--config variants=[cupy/no_such_rung]" "--config modes" "-n"; do
  echo "\$ ./run.sh $args" >> "$out/cases.txt"; ./run.sh $args >> "$out/cases.txt" 2>&1; echo "(exit $?)" >> "$out/cases.txt"; echo >> "$out/cases.txt"
done
echo "\$ .venv/bin/python -m gemmbench check-config /tmp/unknown-key.yaml" >> "$out/cases.txt"
.venv/bin/python -m gemmbench check-config /tmp/unknown-key.yaml >> "$out/cases.txt" 2>&1; echo "(exit $?)" >> "$out/cases.txt"; echo >> "$out/cases.txt"
rm -rf results; touch /tmp/kill-marker; sleep 1
echo "\$ ./run.sh & (results removed); kill -9 of the whole run after 40 s; 45 s later, what it left" >> "$out/cases.txt"
setsid ./run.sh > "$out/killed.log" 2>&1 & pid=$!; sleep 40; kill -9 -- -$pid; sleep 45
{ echo "files the run made under /tmp/gemmbench-workers-$(id -u) that are still there:"; find /tmp/gemmbench-workers-$(id -u) -newer /tmp/kill-marker -printf '%f\n' | sort; echo "(end of list)"
  echo "worker processes of this clone left:"; pgrep -af "gemmbench.run.worker" | grep -v pgrep || echo none; } >> "$out/cases.txt" 2>&1
echo "\$ ./run.sh (after the kill: it continues)" >> "$out/cases.txt"; s=$(date +%s); ./run.sh > "$out/after-kill.log" 2>&1; echo "(exit $?, $(( $(date +%s) - s )) s)" >> "$out/cases.txt"; tail -3 "$out/after-kill.log" >> "$out/cases.txt"
echo done > "$out/done"

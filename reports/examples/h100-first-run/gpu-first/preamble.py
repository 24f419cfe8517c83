"""How long the GPU's jobs (tune, measure) held it before and after their own log's first and last lines: a job's
start and end from jobs.txt (../per-shape-first/jobs.py), its first and last gemmbench line from its log under the
run's results/logs. Whole seconds both, so each job's share is ±1 s; the sums over many jobs are what to read.
Usage: python preamble.py first.log jobs.txt RESULTS/logs"""
import collections
import datetime
import re
import sys
from pathlib import Path

log, jobs, logs = (Path(arg) for arg in sys.argv[1:4])
begin = min(datetime.datetime.strptime(stamp, "%a %b %d %H:%M:%S %Y")
            for stamp in re.findall(r"^\[(\w+ \w+ +\d+ [\d:]+ \d+)\]", log.read_text(), re.M))


def seconds(clock: str) -> float:
    return (datetime.datetime.combine(begin.date(), datetime.time.fromisoformat(clock)) - begin).total_seconds()


sums = collections.defaultdict(lambda: [0, 0.0, 0.0, 0.0])
for line in jobs.read_text().splitlines():
    rule, start, end, *names = line.split(maxsplit=3)
    fields = dict(re.findall(r"(\w+)=([^,]+)", names[0])) if names else {}
    if rule not in ("tune", "measure") or not fields:
        continue
    found = list(logs.glob(f"{rule}/**/{fields['family']}/{fields['variant']}/{fields['mode']}.log"))
    lines = [row[:8] for row in found[0].read_text().splitlines() if re.match(r"\d\d:\d\d:\d\d gemmbench", row)]
    if not lines:
        continue
    row = sums[(rule, fields["family"])]
    row[0] += 1
    row[1] += seconds(lines[0]) - float(start)
    row[2] += seconds(lines[-1]) - seconds(lines[0])
    row[3] += float(end) - seconds(lines[-1])
print(f"{'rule':8} {'family':7} {'jobs':>5} {'start to first line':>20} {'first to last':>14} {'last to end':>12}")
for (rule, family), (count, before, inside, after) in sorted(sums.items()):
    print(f"{rule:8} {family:7} {count:5} {before:20.0f} {inside:14.0f} {after:12.0f}")

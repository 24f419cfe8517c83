"""Every job of a run, from its Snakemake log: rule, start and end (seconds into the run) and wildcards, by start.
With times after the log, only the jobs running at each. Usage: python jobs.py first.log [SECONDS ...]"""
import datetime
import re
import sys
from pathlib import Path

started, wildcards, jobs, stamp, rule, job = {}, {}, [], None, None, None
for line in Path(sys.argv[1]).read_text().splitlines():
    if found := re.match(r"\[(\w+ \w+ +\d+ [\d:]+ \d+)\]", line):
        stamp = datetime.datetime.strptime(found.group(1), "%a %b %d %H:%M:%S %Y")
    elif found := re.match(r"(?:local)?rule (\w+):", line):
        rule = found.group(1)
    elif (found := re.match(r"\s+jobid: (\d+)", line)) and stamp:
        job = found.group(1)
        started[job] = (rule, stamp)
    elif found := re.match(r"\s+wildcards: (.*)", line):
        wildcards[job] = found.group(1)
    elif found := re.match(r"Finished jobid: (\d+)", line):
        jobs.append((found.group(1), *started[found.group(1)], stamp))
begin = min(start for _, _, start, _ in jobs)
rows = sorted(((rule, (start - begin).total_seconds(), (end - begin).total_seconds(), wildcards.get(job, ""))
               for job, rule, start, end in jobs), key=lambda row: row[1])
for at in map(float, sys.argv[2:]) if len(sys.argv) > 2 else [None]:
    if at is not None:
        print(f"--- running at {at:.0f} s")
    for rule, start, end, names in rows:
        if at is None or start <= at < end:
            print(f"{rule:20} {start:6.0f} {end:6.0f}  {names}")

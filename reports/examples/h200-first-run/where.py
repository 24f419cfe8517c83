"""Run in the first run's folder (its results/ and first.log). The report's breakdown of the run
(gemmbench.present.time_spent.of_run), Snakemake's jobs by stage, and the seconds the GPU waited between its jobs
(from the log's job starts and ends: tune, tune_trials and measure hold the GPU)."""
import datetime
import re
import sys
from pathlib import Path

import pandas as pd

from gemmbench.present import time_spent

results = Path("results")
found = time_spent.of_run(pd.read_csv(results / "tables/summary.csv"), pd.read_csv(results / "tables/validation.csv"),
                          results)
print("The GPU's serial path (time_spent.of_run):")
for part, seconds in found["gpu_path"].items():
    print(f"  {part:<16}{seconds:8.1f}")
print(f"  {'sum':<16}{sum(found['gpu_path'].values()):8.1f}")
print("Jobs beside it on the CPU:")
for part, seconds in found["cpu"].items():
    print(f"  {part:<16}{seconds:8.1f}")
print("Snakemake's benchmark files (jobs, summed wall seconds):")
print(found["jobs"].round(1).to_string(index=False))

started, jobs, stamp, rule = {}, [], None, None
for line in Path(sys.argv[1] if len(sys.argv) > 1 else "first.log").read_text().splitlines():
    if found_stamp := re.match(r"\[(\w+ \w+ +\d+ [\d:]+ \d+)\]", line):
        stamp = datetime.datetime.strptime(found_stamp.group(1), "%a %b %d %H:%M:%S %Y")
    elif found_rule := re.match(r"(?:local)?rule (\w+):", line):
        rule = found_rule.group(1)
    elif (found_id := re.match(r"\s+jobid: (\d+)", line)) and stamp:
        started[found_id.group(1)] = (rule, stamp)
    elif found_end := re.match(r"Finished jobid: (\d+)", line):
        jobs.append((*started[found_end.group(1)], stamp))
begin, end = min(j[1] for j in jobs), max(j[2] for j in jobs)
held = sorted((s, e) for r, s, e in jobs if r in ("tune", "tune_trials", "measure"))
idle, busy_until = [], held[0][0]
for s, e in held:
    if s > busy_until:
        idle.append(((busy_until - begin).total_seconds(), (s - busy_until).total_seconds()))
    busy_until = max(busy_until, e)
print(f"The GPU waited between its jobs (log stamps, whole seconds): {sum(g for _, g in idle):.0f} s in {len(idle)} "
      f"gaps, the longest {max((g for _, g in idle), default=0):.0f} s; after its last job "
      f"{(end - busy_until).total_seconds():.0f} s (aggregate, plot, report)")
print("  gaps over 2 s (seconds into the run, length):", [(round(t), round(g)) for t, g in idle if g > 2])

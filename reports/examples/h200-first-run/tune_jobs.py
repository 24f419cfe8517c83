"""Run in the first run's folder (its results/). Where each search's GPU seconds went: the wall of its GPU jobs
(Snakemake's benchmark files: tune, and tune_trials for a TVM search) against the seconds its record's rows account
for (trials, serving checks, audits of the picks; settling is inside each row's measure_s), and how many of its
trials stopped behind (tune.stop_behind). Usage: python tune_jobs.py [GPU] (nvidia-h200 unless named)."""
import glob
import json
import sys
from pathlib import Path

import pandas as pd

GPU = sys.argv[1] if len(sys.argv) > 1 else "nvidia-h200"


def wall(stage, job):
    path = Path(f"results/benchmarks/{stage}/{GPU}/{job}.tsv")
    return pd.read_csv(path, sep="\t").s.iloc[-1] if path.exists() else 0.0


rows = []
for path in sorted(glob.glob(f"results/tune/{GPU}/*/*/*.json")):
    if path.count(".") != 1:
        continue
    job = path.split(f"{GPU}/")[1][:-5]
    record = json.load(open(path))
    parts = {name: record.get(name, []) for name in ("trials", "checks", "audits")}
    row = {"job": job, "wall_s": wall("tune", job) + wall("tune_trials", job),
           **{name: len(part) for name, part in parts.items()},
           "behind": sum(t.get("stopped_by") == "behind" for t in parts["trials"])}
    for name, part in parts.items():
        row[f"{name[:-1]}_s"] = sum((t.get("measure_s") or 0) + (t.get("validate_s") or 0) for t in part)
    row["settle_s"] = sum(t.get("settle_s") or 0 for part in parts.values() for t in part)
    row["kernel_s"] = sum(t.get("kernel_s") or 0 for part in parts.values() for t in part)
    row["rest_s"] = row["wall_s"] - row["trial_s"] - row["check_s"] - row["audit_s"]
    rows.append(row)
table = pd.DataFrame(rows).round(1)
print(table.to_string(index=False))
print(table.drop(columns="job").sum().round(1).to_string())

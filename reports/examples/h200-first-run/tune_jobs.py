"""Where each tune job's seconds went: its wall (Snakemake's benchmark file) against the seconds its record's rows
account for (trials, serving checks, audits of the picks; settling is inside each row's measure_s)."""
import glob
import json

import pandas as pd

rows = []
for path in sorted(glob.glob("results/tune/nvidia-h200/*/*/*.json")):
    if path.count(".") != 1:
        continue
    job = path.split("nvidia-h200/")[1][:-5]
    record = json.load(open(path))
    wall = pd.read_csv(f"results/benchmarks/tune/nvidia-h200/{job}.tsv", sep="\t").s.iloc[-1]
    parts = {name: record.get(name, []) for name in ("trials", "checks", "audits")}
    row = {"job": job, "wall_s": wall, **{name: len(part) for name, part in parts.items()}}
    for name, part in parts.items():
        row[f"{name[:-1]}_s"] = sum((t.get("measure_s") or 0) + (t.get("validate_s") or 0) for t in part)
    row["settle_s"] = sum(t.get("settle_s") or 0 for part in parts.values() for t in part)
    row["kernel_s"] = sum(t.get("kernel_s") or 0 for part in parts.values() for t in part)
    row["rest_s"] = wall - row["trial_s"] - row["check_s"] - row["audit_s"]
    rows.append(row)
table = pd.DataFrame(rows).round(1)
print(table.to_string(index=False))
print(table.drop(columns="job").sum().round(1).to_string())

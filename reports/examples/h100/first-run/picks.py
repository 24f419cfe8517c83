"""Each searched variant-mode's picks, class by class: the first run's (records.tgz) against the committed record's
(a full search, resources/tuning/<gpu>/ of the tree that ran), and each class's own size timed in both runs of the
sitting (the first run's summary.csv, the default run's). Usage, in a folder where records.tgz is unpacked:
python picks.py FIRST/summary.csv DEFAULT/summary.csv COMMITTED_DIR [GPU]"""
import json
import sys
from pathlib import Path

import pandas as pd

first, default = (pd.read_csv(path) for path in sys.argv[1:3])
committed_dir = Path(sys.argv[3])
gpu = sys.argv[4] if len(sys.argv) > 4 else "nvidia-h100-80gb-hbm3"


def seconds(rows, family, variant, mode, size):
    found = rows[(rows.workload == "gemm") & (rows.family == family) & (rows.variant == variant)
                 & (rows["mode"] == mode) & (rows.m == size) & (rows.n == size) & (rows.k == size)
                 & (rows.status == "ok")]
    return float(found.median_s.iloc[0]) if len(found) else float("nan")


table = []
for path in sorted(Path("results/tune", gpu).glob("*/*/*.json")):
    family, variant, mode = path.parts[-3], path.parts[-2], path.stem
    new = json.loads(path.read_text())["classes"]
    old_path = committed_dir / family / variant / f"{mode}.json"
    old = json.loads(old_path.read_text())["classes"] if old_path.exists() else {}
    for size, pick in sorted(new.items(), key=lambda item: int(item[0])):
        a, b = seconds(first, family, variant, mode, int(size)), seconds(default, family, variant, mode, int(size))
        table.append({"job": f"{family}/{variant}/{mode}", "class": int(size),
                      "same": pick["params"] == old.get(size, {}).get("params"),
                      "first_ms": round(1e3 * a, 4), "default_ms": round(1e3 * b, 4),
                      "first_over_default_pct": round(100 * (a / b - 1), 1),
                      "first": json.dumps(pick["params"]), "committed": json.dumps(old.get(size, {}).get("params"))})
table = pd.DataFrame(table)
print(f"{table.job.nunique()} searches, {len(table)} classes: {int(table.same.sum())} picked what the committed record "
      f"picked, {int((~table.same).sum())} other parameters. Each class's own size, first run over default run:")
for same, part in table.groupby("same"):
    diff = part.first_over_default_pct.dropna()
    print(f"  {'same' if same else 'other'} picks: {len(part)} classes, {(diff.abs() <= 2).sum()} within 2%, median "
          f"{diff.median():+.1f}%, {(diff < -2).sum()} faster and {(diff > 2).sum()} slower by more than 2%")
with pd.option_context("display.width", 250, "display.max_colwidth", 120, "display.max_rows", 500):
    print(table.to_string(index=False))

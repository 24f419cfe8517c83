"""Same GPU, same sitting: every class whose first-run pick differs from the committed record's (a full search on
another H200), both parameter sets timed with the main timing (a measured point's, less the power cap's window) and
audited, in two rounds of opposite order. Usage: python compare_picks.py COMMITTED_DIR OUT.csv [GPU]"""
import csv
import json
import sys
from dataclasses import replace
from pathlib import Path

from gemmbench import configuration
from gemmbench.stages.common import variant_of
from gemmbench.tuning import search

committed_dir, out = Path(sys.argv[1]), Path(sys.argv[2])
config = configuration.load("config/config.yaml")
main = {k: v for k, v in config["timing"].items() if k != "capped_span_s"}
config = {**config, "tune": {**config["tune"], "timing": main}}
gpu = sys.argv[3] if len(sys.argv) > 3 else "nvidia-h200"
fields = ["job", "size", "round", "which", "status", "median_s", "tflops", "params"]
with out.open("w", newline="") as handle:
    writer = csv.DictWriter(handle, fieldnames=fields)
    writer.writeheader()
    for new_path in sorted(Path("results/tune", gpu).glob("*/*/*.json")):
        if new_path.name.count(".") != 1:
            continue
        family, name, mode = new_path.parts[-3], new_path.parts[-2], new_path.stem
        old_path = committed_dir / family / name / f"{mode}.json"
        if not old_path.exists():
            continue
        new, old = json.loads(new_path.read_text()), json.loads(old_path.read_text())
        differ = {int(s): (c["params"], old["classes"][s]["params"]) for s, c in new["classes"].items()
                  if s in old["classes"] and old["classes"][s]["params"] != c["params"]}
        if not differ:
            continue
        variant = variant_of(config, f"{family}/{name}")
        plan = [(r, which, size, pair[i]) for r in (1, 2) for size, pair in differ.items()
                for i, which in ((0, "first"), (1, "committed"))[:: 1 if r == 1 else -1]]
        points = [replace(search.trial(config, variant, size, params), stage="pick") for _, _, size, params in plan]
        try:
            rows = search.measure_trials(config, variant, mode, points,
                                         lambda i: f"compare {variant.key} {mode} {plan[i][2]} {plan[i][1]}")
        except Exception as exc:  # one variant's failure leaves the others compared
            print(f"{variant.key} {mode}: {type(exc).__name__}: {exc}", flush=True)
            continue
        for (r, which, size, params), row in zip(plan, rows):
            writer.writerow({"job": f"{family}/{name}/{mode}", "size": size, "round": r, "which": which,
                             "status": row.get("status"), "median_s": row.get("median_s"),
                             "tflops": row.get("tflops"), "params": json.dumps(params, sort_keys=True)})
        handle.flush()

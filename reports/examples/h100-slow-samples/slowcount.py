"""Slow samples (over 1.2x their point's median) of a run's GPU points, from its bench rows, and the quiet lock's waits."""
import json, sys
from pathlib import Path
import numpy as np
root = Path(sys.argv[1])
rows = {}
for path in sorted((root / "bench").rglob("*.json")):
    for row in json.loads(path.read_text()).get("rows", []):
        key = (row.get("family"), row.get("variant"), row.get("mode"), row.get("m"), row.get("n"), row.get("k"), row.get("workload"))
        rows[key] = row
total = slow = points = 0
waits, named = [], []
for key, row in sorted(rows.items(), key=str):
    x = np.asarray(row.get("sample_device_s") or [], float)
    if row.get("status") != "ok" or not x.size or row.get("device") != "cuda":
        continue
    med = np.median(x); n = int((x > 1.2 * med).sum())
    points += 1; total += x.size; slow += n
    if row.get("quiet_wait_s") is not None:
        waits.append(row["quiet_wait_s"])
    if n:
        named.append(f"{'/'.join(map(str, key[:3]))} {key[3]}x{key[4]}x{key[5]}: {n} of {x.size} (max {x.max() / med:.2f}x median; throttled={row.get('throttled')})")
print(f"GPU points {points}, samples {total}, slow samples {slow}")
w = np.asarray(waits)
print(f"quiet_wait_s: {w.size} points" + (f", {int((w > 0.001).sum())} waited > 1 ms, total {w.sum():.2f} s, max {w.max():.3f} s" if w.size else ""))
print("\n".join(named))

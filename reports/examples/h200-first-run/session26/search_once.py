"""One search of a variant as its tune job runs it (the stage, its resident worker), timed: its wall, and what its
rows account for. usage: python search_once.py LABEL FAMILY/VARIANT MODE, from the checkout's root. Its config is
config/config.yaml as gemmbench.configuration.load validated it off the node (which had no jsonschema), dumped to
.dev/s26/config.json."""
import json
import sys
import time
from pathlib import Path

from gemmbench.stages import tune

label, key, mode = sys.argv[1:4]
config = json.loads(Path(".dev/s26/config.json").read_text())
config["tune"]["transfer"] = False
gpu = f"no-records-{label}"
out = Path("results/tune") / gpu / key / f"{mode}.picked.json"
out.parent.mkdir(parents=True, exist_ok=True)
tune.compile_ahead(config, key, mode, gpu, tune.compiled_path(out))
start = time.perf_counter()
record = tune.run(config, key, mode, gpu, out)
wall = time.perf_counter() - start
rows = sum((t.get("measure_s") or 0) + (t.get("validate_s") or 0) for part in ("trials", "checks", "audits")
           for t in record[part])
print(f"{label:12s} wall {wall:6.2f} s, rows {rows:6.2f} s, the rest {wall - rows:5.2f} s", flush=True)

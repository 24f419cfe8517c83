"""On the node: test_gpu.py's planted faults that the warm-up touches, and its cheats that cannot hit, without pytest
(configs validated locally by make_controls.py). One line per case; exit status 1 if any case is not as the test asks."""
import json
import sys
import tempfile
import time
from pathlib import Path

from gemmbench.stages import build, measure

UNFINISHED = "unwritten when the harness's stream had finished its work"  # test_gpu.py's
bad = 0
for case in json.load(open(".dev/s27/controls.json")):
    tmp = Path(tempfile.mkdtemp())
    start = time.perf_counter()

    def run(variant, cfg):
        cfg = {**cfg, "cache_dir": str(tmp / "cache")}
        build.run(cfg, variant, "fp32", tmp / "build.json")
        return measure.run(cfg, variant, "fp32", tmp / "build.json", tmp / "validate.json", tmp / "bench.json")

    if case["kind"] == "fault":
        checked, timed = (rows[0] for rows in run(case["variant"], case["config"]))
        caught = case["says"] + [UNFINISHED]
        ok = timed["status"] != "ok" and (checked["status"] != "ok" or (
            timed["status"] == "failed" and any(w in timed["message"] for w in caught)))
        said = timed["message"] if checked["status"] == "ok" else "validation: " + checked["message"]
    else:
        rows = {v: run(v, cfg)[1][0] for v, cfg in case["configs"].items()}
        cheat, cublas = rows[case["variant"]], rows["cublas/gemm"]
        ok = cheat["status"] == cublas["status"] == "ok" and all(cheat[n] > cublas[n] for n in ("median_s", "min_s"))
        said = f"cheat {cheat['status']} {cheat.get('median_s')} vs cuBLAS {cublas.get('median_s')}"
    bad += not ok
    print(f"{'ok  ' if ok else 'BAD '} {case['variant']:32s} {case['timing']:7s} {time.perf_counter() - start:5.1f} s  "
          f"{said[:150]}", flush=True)
sys.exit(1 if bad else 0)

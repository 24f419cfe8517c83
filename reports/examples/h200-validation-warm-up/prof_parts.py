"""Where a search's trial seconds go, by piece and class size, in this process (the worker's loop run in-process):
python prof_parts.py FAMILY/VARIANT MODE OUT.txt"""
import collections
import functools
import json
import sys
import time
from pathlib import Path

from gemmbench.measure import cuda_device, timing
from gemmbench.measure.ledger import Ledger
from gemmbench.run import bench, operands, rows, worker
from gemmbench.stages import tune
from gemmbench.tuning import search

key, mode, out_txt = sys.argv[1:4]
SIZE = ["?"]
SPENT = collections.defaultdict(float)
COUNT = collections.Counter()


def timed(name, fn):
    @functools.wraps(fn)
    def wrapper(*a, **k):
        start = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            SPENT[(SIZE[0], name)] += time.perf_counter() - start
            COUNT[(SIZE[0], name)] += 1
    return wrapper


def sized_tune_row(fn):
    @functools.wraps(fn)
    def wrapper(variant, backend, task, point, *a, **k):
        SIZE[0] = f"{point.stage or 'trial'}:{'x'.join(map(str, point.sizes.values()))}"
        return timed("tune_row", fn)(variant, backend, task, point, *a, **k)
    return wrapper


for cls in (cuda_device.CudaBackend,):
    for name in ("inputs", "poisoned_output", "errors", "digest", "outside_writes", "host_time", "device_time",
                 "runs_outside_stream", "flush_cache", "watch"):
        if hasattr(cls, name):
            setattr(cls, name, timed(f"backend.{name}", getattr(cls, name)))
for name in ("before", "after", "problem", "batch", "before_batch", "after_batch"):
    if hasattr(Ledger, name):
        setattr(Ledger, name, timed(f"ledger.{name}", getattr(Ledger, name)))
for module, names in ((rows, ("operands_of", "kept_reference", "compare", "validate_row", "bench_row")),
                      (bench, ("operands_of", "compare", "reference", "_audit", "_held_problem", "_host_disagrees")),
                      (timing, ("warm_up", "settle", "sample", "sample_batched"))):
    for name in names:
        setattr(module, name, timed(f"{module.__name__.split('.')[-1]}.{name}", getattr(module, name)))
operands.References.check = timed("references.check", operands.References.check)
operands.References.get = timed("references.get", operands.References.get)
rows.tune_row = sized_tune_row(rows.tune_row)


def in_process(task, timeout_s, describe=None, on_row=None, log_rows=True):
    got = {}
    worker.run(task, 0, {}, lambda event, **msg: got.update({msg["index"]: msg["row"]} if event == "row" else {}))
    return [got[i] for i in range(len(task.points))], None


search.run_task = in_process
config = json.loads(Path(".dev/s26/config.json").read_text())
config["tune"]["transfer"] = False
gpu = "prof-parts"
out = Path("results/tune") / gpu / key / f"{mode}.picked.json"
out.parent.mkdir(parents=True, exist_ok=True)
tune.compile_ahead(config, key, mode, gpu, tune.compiled_path(out))
start = time.perf_counter()
record = tune.run(config, key, mode, gpu, out)
wall = time.perf_counter() - start
with open(out_txt, "a") as f:
    f.write(f"== {key} {mode}: wall {wall:.2f} s\n")
    for size in sorted({s for s, _ in SPENT}):
        f.write(f"  {size}\n")
        for (s, name), sec in sorted(SPENT.items(), key=lambda kv: -kv[1]):
            if s == size and sec > 0.005:
                f.write(f"    {name:32s} {sec:8.3f} s  x{COUNT[(s, name)]}\n")
print(key, mode, round(wall, 2), flush=True)

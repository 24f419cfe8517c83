"""At 2048 (the log-midpoint between classes 1024 and 4096), each CuPy rung with the 1024 class's committed
parameters and with the 4096 class's: which serves it faster."""
import glob, json, os, sys, tempfile
sys.path.insert(0, os.getcwd())
import cupy as cp, numpy as np
import kernels.cupy  # noqa: F401
from kernels import registry
stream = cp.cuda.Stream(non_blocking=True)
def timeit(f, reps=10, rounds=5):
    for _ in range(3): f()
    stream.synchronize(); ts = []
    for _ in range(rounds):
        e0, e1 = cp.cuda.Event(), cp.cuda.Event()
        e0.record(stream)
        for _ in range(reps): f()
        e1.record(stream); e1.synchronize(); ts.append(cp.cuda.get_elapsed_time(e0, e1) / reps * 1e-3)
    return float(np.median(ts))
n = 2048
rng = cp.random.default_rng(0)
a32 = rng.standard_normal((n, n), dtype=cp.float32); b32 = rng.standard_normal((n, n), dtype=cp.float32)
ops = {"fp32": (a32, b32), "tf32": (a32, b32),
       "bf16": tuple((x.view(cp.uint32) >> 16).astype(cp.uint16) for x in (a32, b32))}
c = cp.empty((n, n), cp.float32)
cache = tempfile.mkdtemp()
paths = {}
for path in sorted(glob.glob("resources/tuning/nvidia-h100-80gb-hbm3/cupy/*/*.json")) + sorted(glob.glob("resources/tuning/nvidia-h200/cupy/*/*.json")):
    paths[path.split("/", 3)[3]] = path  # the H200's record where there is one, else the H100's (as a run transfers it)
for path in sorted(paths.values()):
    rec = json.load(open(path))
    if "1024" not in rec["classes"] or "4096" not in rec["classes"]:
        continue
    v = registry.registered(rec["variant"]); mode = rec["mode"]
    out = {"variant": rec["variant"], "mode": mode, "record": path.split("/")[2]}
    for cls in ("1024", "4096"):
        try:
            built = v.build(mode, {**v.params, **rec["classes"][cls]["params"]}, cache)
            a, b = ops[mode]
            out[cls] = round(timeit(lambda: v.run(built.artifact, a, b, c, stream)) * 1e6, 1)
        except Exception as exc:
            out[cls] = f"{type(exc).__name__}: {exc}"[:100]
    print(json.dumps(out), flush=True)

"""Short launches: does a point's time follow where its operands were allocated? Eight operand sets, each timed by
batched samples (~100 us), in five interleaved rounds: a set that is slower in every round is its placement."""
import json, os, sys, tempfile
sys.path.insert(0, os.getcwd())
import cupy as cp, numpy as np
import kernels.cupy  # noqa: F401
from kernels import registry
stream = cp.cuda.Stream(non_blocking=True)
cache = tempfile.mkdtemp()
out = open(os.path.join(os.environ.get("OUT", "."), "placement.jsonl"), "w")
for key, mode, n, cls in (("cupy/tc02_ldmatrix", "tf32", 1024, "1024"), ("cupy/08_bank_conflicts", "fp32", 1024, "1024"),
                          ("cupy/tc02_ldmatrix", "bf16", 1024, "1024")):
    v = registry.registered(key)
    rec = json.load(open(f"resources/tuning/nvidia-h200/{key}/{mode}.json"))
    built = v.build(mode, {**v.params, **rec["classes"][cls]["params"]}, cache)
    sets = []
    for i in range(8):
        rng = cp.random.default_rng(i)
        a = rng.standard_normal((n, n), dtype=cp.float32); b = rng.standard_normal((n, n), dtype=cp.float32)
        if mode == "bf16":
            a, b = ((x.view(cp.uint32) >> 16).astype(cp.uint16) for x in (a, b))
        sets.append((a, b, cp.empty((n, n), cp.float32), cp.empty(1 << 22, cp.float32)))  # a gap between sets
    medians = []
    for r in range(5):
        row = []
        for a, b, c, _ in sets:
            f = lambda: v.run(built.artifact, a, b, c, stream)
            for _ in range(10): f()
            e0, e1, ts = cp.cuda.Event(), cp.cuda.Event(), []
            for _ in range(100):
                e0.record(stream); f(); f(); e1.record(stream); e1.synchronize()
                ts.append(cp.cuda.get_elapsed_time(e0, e1) * 1e-3 / 2)
            row.append(round(float(np.median(ts)) * 1e6, 2))
        medians.append(row)
    out.write(json.dumps({"key": key, "mode": mode, "n": n, "per_round_per_set_us": medians}) + "\n"); out.flush()

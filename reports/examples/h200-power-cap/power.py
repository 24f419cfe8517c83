"""Two questions for the run-to-run disagreement, on a bare node (CuPy and cuBLAS only):
1. power-capped points: the device time per launch over 5 s of back-to-back launches, with the SM clock, power and
   temperature (nvidia-smi every 20 ms): how much does a 0.25 s window's median depend on when it starts?
2. short launches: batched medians of ~100 us samples, each round with freshly allocated operands: does the median
   move with the allocation?"""
import json, os, subprocess, sys, tempfile, time
os.environ.setdefault("CUPY_TF32", "1")
sys.path.insert(0, os.getcwd())
import cupy as cp, numpy as np
import kernels.cublas, kernels.cupy  # noqa: F401
from kernels import registry
out = os.environ.get("OUT", ".")
stream = cp.cuda.Stream(non_blocking=True)
cache = tempfile.mkdtemp()

def operands(mode, n, seed):
    rng = cp.random.default_rng(seed)
    a = rng.standard_normal((n, n), dtype=cp.float32); b = rng.standard_normal((n, n), dtype=cp.float32)
    if mode == "bf16":
        a, b = ((x.view(cp.uint32) >> 16).astype(cp.uint16) for x in (a, b))
    return a, b, cp.empty((n, n), cp.float32)

def built(key, mode, cls):
    v = registry.registered(key)
    params = dict(v.params)
    if cls:
        path = f"resources/tuning/nvidia-h200/{key}/{mode}.json"
        if not os.path.exists(path):
            path = path.replace("nvidia-h200", "nvidia-h100-80gb-hbm3")
        rec = json.load(open(path))
        params.update(rec["classes"][cls]["params"])
    return v, v.build(mode, params, cache)

def series(key, mode, n, cls, seconds=5.0, idle=3.0):
    v, b = built(key, mode, cls)
    a, bb, c = operands(mode, n, 1)
    f = lambda: v.run(b.artifact, a, bb, c, stream)
    f(); stream.synchronize(); time.sleep(idle)
    smi = subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active",
                            "--format=csv,noheader,nounits", "-lms", "20"], stdout=subprocess.PIPE, text=True)
    time.sleep(0.3)
    t0 = time.time(); ev = []
    start = cp.cuda.Event(); start.record(stream)
    while time.time() - t0 < seconds:
        chunk = []
        for _ in range(50):
            e = cp.cuda.Event(); f(); e.record(stream); chunk.append(e)
        chunk[-1].synchronize(); ev += chunk
    stamps = np.array([cp.cuda.get_elapsed_time(start, e) for e in ev]) * 1e-3
    smi.terminate(); log = smi.communicate()[0].strip().splitlines()
    per = np.diff(np.concatenate([[0.0], stamps]))
    res = {"key": key, "mode": mode, "n": n, "t0": t0, "launches": len(per)}
    # medians of 0.25 s windows from several starts, and of 1 s windows
    for w in (0.25, 1.0):
        res[f"median_{w}"] = {f"{s:.2f}": float(np.median(per[(stamps >= s) & (stamps < s + w)]) * 1e6)
                              for s in np.arange(0.5, seconds - w + 1e-9, 0.25)}
    res["blocks_50ms_us"] = [round(float(np.median(per[(stamps >= s) & (stamps < s + 0.05)])) * 1e6, 1)
                             for s in np.arange(0, seconds - 0.05, 0.05)]
    res["smi"] = log
    return res

def batched(key, mode, n, cls, rounds=8, target=100e-6):
    v, b = built(key, mode, cls)
    res = {"key": key, "mode": mode, "n": n, "rounds": []}
    for r in range(rounds):
        ops = [operands(mode, n, 100 + r + 1000 * i) for i in range(1 + r % 3)]  # other allocations each round
        a, bb, c = ops[-1]
        f = lambda: v.run(b.artifact, a, bb, c, stream)
        for _ in range(20): f()
        e0, e1 = cp.cuda.Event(), cp.cuda.Event()
        e0.record(stream); f(); e1.record(stream); e1.synchronize()
        one = cp.cuda.get_elapsed_time(e0, e1) * 1e-3
        launches = max(1, int(np.ceil(target / one)))
        ts = []
        for _ in range(200):
            e0.record(stream)
            for _ in range(launches): f()
            e1.record(stream); e1.synchronize(); ts.append(cp.cuda.get_elapsed_time(e0, e1) * 1e-3 / launches)
        res["rounds"].append({"launches": launches, "median_us": round(float(np.median(ts)) * 1e6, 3),
                              "iqr_rel": float(np.subtract(*np.percentile(ts, [75, 25])) / np.median(ts)),
                              "a_ptr_mod": a.data.ptr % (1 << 21), "c_ptr_mod": c.data.ptr % (1 << 21)})
        del ops, a, bb, c
        time.sleep(0.2)
    return res

with open(os.path.join(out, "power.jsonl"), "w") as fh:
    for key, mode, cls in (("cupy/08_bank_conflicts", "fp32", "1024"), ("cupy/tc02_ldmatrix", "tf32", "1024"),
                           ("cupy/tc02_ldmatrix", "bf16", "1024")):
        fh.write(json.dumps(batched(key, mode, 1024, cls)) + "\n"); fh.flush()
    fh.write(json.dumps(batched("cupy/tc09_registers_tma_store", "tf32", 2048, "4096")) + "\n"); fh.flush()
    for rep in range(2):
        for key, mode, cls in (("cublas/gemm", "bf16", None), ("cupy/tc05_tma", "bf16", "8192"),
                               ("cupy/tc06_persistent", "tf32", "8192"), ("cublas/gemm", "tf32", None)):
            fh.write(json.dumps(series(key, mode, 8192, cls)) + "\n"); fh.flush()

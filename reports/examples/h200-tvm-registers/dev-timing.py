"""tvm/08_tirx_registers on the node: fp64 check at awkward shapes, then timing at the sweep sizes beside cuBLAS TF32,
tc07 (its H200 classes) and tvm/07 TF32 (its H200 classes), several parameter sets of 08."""
import json, os, sys, tempfile, time
os.environ.setdefault("CUPY_TF32", "1")
sys.path.insert(0, os.getcwd())
import cupy as cp, numpy as np
from kernels import registry
import kernels.cublas, kernels.cupy, kernels.tvm  # noqa: F401
stream = cp.cuda.Stream(non_blocking=True)
cache = tempfile.mkdtemp()
out = open(os.path.join(os.environ.get("OUT", "."), "t08.jsonl"), "w")
def emit(**kw):
    out.write(json.dumps(kw) + "\n"); out.flush(); print(json.dumps(kw), flush=True)
def timeit(f, reps=10, rounds=7):
    for _ in range(3): f()
    stream.synchronize(); ts = []
    for _ in range(rounds):
        e0, e1 = cp.cuda.Event(), cp.cuda.Event()
        e0.record(stream)
        for _ in range(reps): f()
        e1.record(stream); e1.synchronize(); ts.append(cp.cuda.get_elapsed_time(e0, e1) / reps * 1e-3)
    return float(np.median(ts))
v08 = registry.registered("tvm/08_tirx_registers")
sets = [dict(v08.params), {"BM": 256, "STAGES": 3, "GROUP": 16}, {"BM": 128, "STAGES": 4, "GROUP": 8},
        {"BM": 128, "STAGES": 6, "GROUP": 16}]
built = {}
for p in sets:
    t0 = time.time()
    try:
        b = v08.build("tf32", p, cache)
        built[json.dumps(p)] = b
        emit(what="build", params=p, facts={k: b.facts.get(k) for k in ("registers", "local_bytes", "shared_bytes")}, s=round(time.time() - t0, 1))
    except Exception as exc:
        emit(what="build", params=p, error=repr(exc)[:500])
rng = np.random.default_rng(0)
for key, b in built.items():
    for (m, n, k) in (() if os.environ.get("NOCHECK") else ((1, 1, 1), (7, 13, 5), (33, 65, 17), (127, 255, 63), (1000, 999, 1001), (4097, 129, 257), (300, 4096, 33), (2048, 2048, 2048))):
        a = cp.asarray(rng.standard_normal((m, k), dtype=np.float32)); bb = cp.asarray(rng.standard_normal((k, n), dtype=np.float32))
        c = cp.full((m, n), cp.nan, cp.float32)
        try:
            v08.run(b.artifact, a, bb, c, stream); stream.synchronize()
            ref = a.astype(cp.float64) @ bb.astype(cp.float64)
            scale = cp.abs(a.astype(cp.float64)) @ cp.abs(bb.astype(cp.float64))
            err = float(cp.max(cp.abs(c - ref) / cp.maximum(scale, 1e-30)))
            emit(what="check", params=json.loads(key), shape=[m, n, k], nan=int(cp.isnan(c).sum()), err_over_abs=err)
        except Exception as exc:
            emit(what="check", params=json.loads(key), shape=[m, n, k], error=repr(exc)[:300])
cub = registry.registered("cublas/gemm"); cb = cub.build("tf32", {}, cache)
def h200(key):
    rec = json.load(open(f"resources/tuning/nvidia-h200/{key}/tf32.json"))
    return {c: f["params"] for c, f in rec["classes"].items()}
others = {}
for key in ("cupy/tc07_registers", "tvm/07_tirx_wgmma"):
    v = registry.registered(key)
    others[key] = (v, {c: v.build("tf32", {**v.params, **p}, cache) for c, p in h200(key).items()})
CLASS = {1024: "1024", 2048: "4096", 4096: "4096", 8192: "8192", 16384: "8192"}
for n in (1024, 2048, 4096, 8192, 16384):
    a = cp.asarray(rng.standard_normal((n, n), dtype=np.float32)); bb = cp.asarray(rng.standard_normal((n, n), dtype=np.float32))
    c = cp.empty((n, n), cp.float32)
    reps = 10 if n < 16384 else 3
    base = timeit(lambda: cub.run(cb.artifact, a, bb, c, stream), reps)
    with stream:
        mm = timeit(lambda: cp.matmul(a, bb, out=c), reps)
    row = {"n": n, "cublas_us": round(base * 1e6, 1), "cupy_matmul_us": round(mm * 1e6, 1)}
    for key, (v, bs) in others.items():
        t = timeit(lambda: v.run(bs[CLASS[n]].artifact, a, bb, c, stream), reps); row[key] = round(t * 1e6, 1)
    for key, b in built.items():
        t = timeit(lambda: v08.run(b.artifact, a, bb, c, stream), reps); row["08 " + key] = round(t * 1e6, 1)
    emit(what="time", **row)

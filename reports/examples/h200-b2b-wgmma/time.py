import os, sys, json
os.environ.setdefault("CUPY_TF32", "1")
import cupy as cp, numpy as np
here = os.path.dirname(os.path.abspath(__file__))
inc = os.path.abspath(os.path.join(here, "../../kernels/b2b"))
src = open(os.path.join(here, "staged.cu")).read()
configs = [(2, 2), (3, 2), (4, 1), (5, 1), (6, 1)]
names = [f"staged<{s}, {b}, true>" for s, b in configs]
mod = cp.RawModule(code=src, options=("-std=c++17", f"-I{inc}"), name_expressions=names)
SM = cp.cuda.Device().attributes["MultiProcessorCount"]
LDA, LDB = 68, 72
def smem(s): return 4 * (2 * 64 * LDB + 64 * LDA + s * 64 * LDA)
def timeit(f, reps=30, rounds=7):
    for _ in range(5): f()
    cp.cuda.Device().synchronize()
    ts = []
    for _ in range(rounds):
        e0, e1 = cp.cuda.Event(), cp.cuda.Event()
        e0.record()
        for _ in range(reps): f()
        e1.record(); e1.synchronize()
        ts.append(cp.cuda.get_elapsed_time(e0, e1) / reps * 1e-3)
    return float(np.median(ts)), float(min(ts))
out = []
for m in (65536, 262144, 1048576):
    k0 = n0 = n1 = 64
    rng = cp.random.default_rng(0)
    a0 = rng.standard_normal((m, k0), dtype=cp.float32); b0 = rng.standard_normal((k0, n0), dtype=cp.float32)
    b1 = rng.standard_normal((n0, n1), dtype=cp.float32)
    ref = (a0.astype(cp.float64) @ b0.astype(cp.float64)) @ b1.astype(cp.float64)
    nbytes = 4 * (m * k0 + k0 * n0 + n0 * n1 + m * n1)
    a1 = cp.empty((m, n0), cp.float32); dd = cp.empty((m, n1), cp.float32)
    def unfused():
        cp.matmul(a0, b0, out=a1); cp.matmul(a1, b1, out=dd)
    tu = timeit(unfused)
    out.append(dict(m=m, kernel="cupy.matmul x2 (TF32)", median_us=tu[0]*1e6, gbps=nbytes/tu[0]/1e9))
    for (s, b), name in zip(configs, names):
        k = mod.get_function(name)
        k.max_dynamic_shared_size_bytes = smem(s)
        d = cp.full((m, n1), cp.nan, cp.float32)
        blocks = min((m + 63) // 64, b * SM)
        f = lambda: k((blocks,), (256,), (np.int32(m), np.int32(k0), np.int32(n0), np.int32(n1), a0, b0, b1, d), shared_mem=smem(s))
        f(); cp.cuda.Device().synchronize()
        err = float(cp.max(cp.abs(d - ref)) / cp.max(cp.abs(ref)))
        t = timeit(f)
        out.append(dict(m=m, kernel=name, regs=k.num_regs, smem=smem(s), median_us=t[0]*1e6, min_us=t[1]*1e6,
                        gbps=nbytes/t[0]/1e9, speedup=tu[0]/t[0], rel_err=err))
for r in out: print(json.dumps(r))

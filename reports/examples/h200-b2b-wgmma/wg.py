import os, sys, json
os.environ.setdefault("CUPY_TF32", "1")
sys.path.insert(0, os.getcwd())
import cupy as cp, numpy as np
from kernels.cupy.tensorcore import tma
K = "kernels"
configs = [(1, 4), (1, 8), (2, 4), (2, 8), (3, 6), (4, 4), (4, 8)]
DEBUG = len(sys.argv) > 1 and os.environ.get("TIMED") is None
if len(sys.argv) > 1 and not DEBUG:
    configs = [tuple(map(int, sys.argv[1].split(",")[:2]))]
    shapes_override = [(int(sys.argv[1].split(",")[2]), 64, 64, 64)]
else:
    shapes_override = None
if DEBUG: configs = [tuple(map(int, sys.argv[1].split(",")[:2]))]
names = [f"b2b_fused_wgmma<{c}, {s}, true>" for c, s in configs]
mod = cp.RawModule(code=open(f"{K}/b2b/05_fused_wgmma.cu").read(),
                   options=("-std=c++17", f"-I{K}/b2b", f"-I{K}/cupy/tensorcore", f"-I{K}/cupy", "-arch=sm_90a"),
                   name_expressions=names)
old = cp.RawModule(code=open(".dev/b2b/staged.cu").read(), options=("-std=c++17", f"-I{K}/b2b"), name_expressions=["staged<2, 2, true>"])
SM = cp.cuda.Device().attributes["MultiProcessorCount"]
def smem(s): return 2048 + 1024 + 4 * (2 * 4096 + s * 4096) + 16 * s
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
    return float(np.median(ts))
shapes = [(65536, 64, 64, 64), (262144, 64, 64, 64), (1048576, 64, 64, 64), (4097, 36, 20, 44), (1000, 64, 64, 8), (70000, 32, 64, 64)]
if shapes_override: shapes = shapes_override
if DEBUG: shapes = [(int(sys.argv[1].split(",")[2]), 64, 64, 64)]
for m, k0, n0, n1 in shapes:
    rng = cp.random.default_rng(0)
    a0 = rng.standard_normal((m, k0), dtype=cp.float32); b0 = rng.standard_normal((k0, n0), dtype=cp.float32)
    b1 = rng.standard_normal((n0, n1), dtype=cp.float32)
    ref = (a0.astype(cp.float64) @ b0.astype(cp.float64)) @ b1.astype(cp.float64)
    scale = cp.sqrt((cp.abs(a0.astype(cp.float64)) @ cp.abs(b0.astype(cp.float64))) ** 2 @ (b1.astype(cp.float64) ** 2))
    nbytes = 4 * (m * k0 + k0 * n0 + n0 * n1 + m * n1)
    a1 = cp.empty((m, n0), cp.float32); dd = cp.empty((m, n1), cp.float32)
    tu = 1.0 if DEBUG else timeit(lambda: (cp.matmul(a0, b0, out=a1), cp.matmul(a1, b1, out=dd)))
    print(json.dumps(dict(m=m, k0=k0, n0=n0, n1=n1, kernel="cupy x2", us=tu * 1e6, gbps=nbytes / tu / 1e9)))
    amap = tma.tensor_map(a0.data.ptr, m, k0, k0, 4, 64, 32, 128)
    rows = []
    if (k0, n0, n1) == (64, 64, 64):
        k = old.get_function("staged<2, 2, true>"); k.max_dynamic_shared_size_bytes = 4 * (2 * 64 * 72 + 3 * 64 * 68)
        rows.append(("rung04", k, lambda k, d: k((min(m // 64, 2 * SM),), (256,), (np.int32(m), np.int32(k0), np.int32(n0), np.int32(n1), a0, b0, b1, d), shared_mem=4 * (2 * 64 * 72 + 3 * 64 * 68))))
    for (c, s), name in zip(configs, names):
        k = mod.get_function(name); k.max_dynamic_shared_size_bytes = smem(s)
        rows.append((name, k, lambda k, d, c=c, s=s: k((min((m + 63) // 64, SM),), (c * 128 + 32,), (np.int32(m), np.int32(k0), np.int32(n0), np.int32(n1), amap, b0, b1, d), shared_mem=smem(s))))
    for name, k, launch in rows:
        d = cp.full((m, n1), cp.nan, cp.float32)
        launch(k, d); cp.cuda.Device().synchronize()
        err = float(cp.nanmax(cp.abs(d - ref) / scale)) if not bool(cp.isnan(d).any()) else float("nan")
        t = timeit(lambda: launch(k, d)) if not DEBUG else 1.0
        print(json.dumps(dict(m=m, kernel=name, regs=k.num_regs, us=t * 1e6, gbps=nbytes / t / 1e9, speedup=tu / t, err_units=err / 2**-11)))

import os, sys
import cupy as cp, numpy as np
here = os.path.dirname(os.path.abspath(__file__))
inc = os.path.abspath(os.path.join(here, "../../kernels/b2b"))
s, b = int(sys.argv[1]), int(sys.argv[2])
name = f"staged<{s}, {b}, true>"
mod = cp.RawModule(code=open(os.path.join(here, "staged.cu")).read(), options=("-std=c++17", f"-I{inc}", "-lineinfo"), name_expressions=[name])
k = mod.get_function(name)
sm = 4 * (2 * 64 * 72 + 64 * 68 + s * 64 * 68)
k.max_dynamic_shared_size_bytes = sm
m = 1 << 20
a0 = cp.random.standard_normal((m, 64), dtype=cp.float32); b0 = cp.random.standard_normal((64, 64), dtype=cp.float32)
b1 = cp.random.standard_normal((64, 64), dtype=cp.float32); d = cp.empty((m, 64), cp.float32)
blocks = min(m // 64, b * cp.cuda.Device().attributes["MultiProcessorCount"])
for _ in range(3):
    k((blocks,), (256,), (np.int32(m), np.int32(64), np.int32(64), np.int32(64), a0, b0, b1, d), shared_mem=sm)
cp.cuda.Device().synchronize()

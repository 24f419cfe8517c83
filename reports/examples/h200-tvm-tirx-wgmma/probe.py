"""On the node: TVM TIRx wgmma kernels (generated here, compiled there by CuPy's NVRTC) against cuBLAS BF16."""
import re
import sys
from pathlib import Path

import cupy
import numpy as np

from gemmbench.measure.devices import bf16_bits
from kernels.cublas import gemm as cublas
from kernels.cupy.tensorcore.tma import tensor_map
from kernels.tvm.variants import nvrtc_options

HERE = Path(__file__).parent
PRELUDE = "struct alignas(64) CUtensorMap_st { unsigned long long opaque[16]; };\ntypedef struct CUtensorMap_st CUtensorMap;\n"


def load(path):
    src = PRELUDE + path.read_text()
    module = cupy.RawModule(code=src, options=("-arch=sm_90a", *nvrtc_options()), backend="nvrtc")
    f = module.get_function("gemm_kernel")
    names = re.search(r"gemm_kernel\(([^)]*)\)", src).group(1)
    names = [p.strip().split()[-1] for p in names.split(",")]
    return f, names


def timed(fn, reps):
    fn()
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    end.synchronize()
    return cupy.cuda.get_elapsed_time(start, end) / reps / 1e3


def main():
    rng = cupy.random.default_rng(1)
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        cb = cublas.build("bf16", {}, None)
        for path in sorted(HERE.glob("wg-*.cu")):
            BM, BN, STAGES, GROUP = map(int, path.stem.split("-")[1:])
            f, names = load(path)
            smem = 1024 + STAGES * (BM * 64 + 64 * BN) * 2
            f.max_dynamic_shared_size_bytes = smem
            threads = (BM // 64 + 1) * 128
            print(path.name, "regs", f.num_regs, "smem", smem, flush=True)
            for (m, n, k) in [(256, 256, 256), (1000, 1016, 1000), (4096, 4096, 4096), (8192, 8192, 8192), (16384, 16384, 16384)]:
                a = bf16_bits(cupy, rng.standard_normal((m, k), dtype=cupy.float32))
                b = bf16_bits(cupy, rng.standard_normal((k, n), dtype=cupy.float32))
                c = cupy.full((m, n), cupy.nan, dtype=cupy.float32)
                tiles = -(-m // BM) * -(-n // BN)
                maps = {"a_map": tensor_map(a.data.ptr, m, k, k, 2, BM), "b_map": tensor_map(b.data.ptr, k, n, n, 2, 64)}
                vals = {"C_ptr": c, **maps, "M": np.int32(m), "N": np.int32(n), "K": np.int32(k), "tiles": np.int32(tiles)}
                args = tuple(vals[x] for x in names)
                run = lambda: f((tiles,), (threads,), args, shared_mem=smem, stream=stream)  # noqa: E731
                run()
                stream.synchronize()
                if m <= 4096:
                    wa = (a.astype(cupy.uint32) << 16).view(cupy.float32).astype(cupy.float64)
                    wb = (b.astype(cupy.uint32) << 16).view(cupy.float32).astype(cupy.float64)
                    ref = wa @ wb
                    err = float(cupy.max(cupy.abs(c - ref)) / cupy.max(cupy.abs(ref)))
                    nans = int(cupy.isnan(c).sum())
                else:
                    err, nans = float("nan"), int(cupy.isnan(c).sum())
                reps = max(3, int(2e12 / (2 * m * n * k)) + 3)
                t = timed(run, reps)
                c2 = cupy.empty((m, n), dtype=cupy.float32)
                tb = timed(lambda: cublas.run(cb.artifact, a, b, c2, stream), reps)
                print(f"  {m}x{n}x{k}: err {err:.2e} nans {nans}  tirx {2*m*n*k/t/1e12:.0f} TFLOP/s  cublas {2*m*n*k/tb/1e12:.0f}  {100*tb/t:.1f}%", flush=True)


if __name__ == "__main__":
    main()

"""On the node, without TVM: rung 07's generated sources (probe07.json, made on the CPU host by TVM 0.27) compiled by
CuPy's NVRTC as the run path does, launched as the module's `launch` says, checked against the fp64 product of the
same (rounded) inputs with a NaN-poisoned output, and timed with events around back-to-back launches (not the
harness's timing) beside cuBLAS (TF32 through CUPY_TF32=1)."""
import json
import os
import sys

os.environ["CUPY_TF32"] = "1"
import cupy  # noqa: E402
import numpy as np  # noqa: E402
from cupy.cuda import compiler  # noqa: E402

from kernels.tvm import variants  # noqa: E402

module = variants.schedule_module("07_tirx_wgmma.py")
stream = cupy.cuda.Stream(non_blocking=True)
stream.use()
rng = np.random.default_rng(0)


def bf16_bits(x):
    u = x.astype(np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def from_bits(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def operands(m, n, k, mode):
    a, b = rng.standard_normal((m, k), np.float32), rng.standard_normal((k, n), np.float32)
    if mode == "bf16":
        a, b = bf16_bits(a), bf16_bits(b)
        return cupy.asarray(a), cupy.asarray(b), from_bits(a).astype(np.float64) @ from_bits(b).astype(np.float64)
    return cupy.asarray(a), cupy.asarray(b), a.astype(np.float64) @ b.astype(np.float64)


def run(functions, shared, p, a, b, c, buffers):
    for name, grid, block, arguments in module.launch(p, a, b, c, buffers, stream):
        function, parameters = functions[name]
        function(grid, block, tuple(arguments[q] for q in parameters), stream=stream,
                 shared_mem=shared if name == "main" else 0)


for index, entry in enumerate(json.load(open(".dev/s18/probe07.json"))):
    mode, p = entry["mode"], entry["params"]
    options = variants.nvrtc_options() + ("-arch=sm_90a",)
    cubin, _ = compiler.compile_using_nvrtc(entry["source"], options, arch="90")
    with open(f"/tmp/probe07-{index}.cubin", "wb") as f:
        f.write(cubin)
    raw = cupy.RawModule(path=f"/tmp/probe07-{index}.cubin")
    functions = {name: (raw.get_function(k["name"]), tuple(k["parameters"])) for name, k in entry["kernels"].items()}
    shared = module.shared_bytes(p)
    functions["main"][0].max_dynamic_shared_size_bytes = shared
    print(mode, p, "registers", functions["main"][0].num_regs, "local", functions["main"][0].local_size_bytes,
          flush=True)
    buffers = {}
    for m, n, k in [(1, 1, 1), (7, 13, 5), (33, 65, 17), (1000, 999, 1001), (1000, 1000, 1000), (136, 264, 72),
                    (4096, 96, 8192), (2047, 4097, 1025), (2048, 2048, 2048)]:
        a, b, ref = operands(m, n, k, mode)
        c = cupy.full((m, n), np.nan, np.float32)
        run(functions, shared, p, a, b, c, buffers)
        stream.synchronize()
        got = cupy.asnumpy(c).astype(np.float64)
        err = np.abs(got - ref).max() / max(np.abs(ref).max(), 1e-30)
        print(f"  {m}x{n}x{k}: rel err {err:.2e} nan {int(np.isnan(got).sum())}", flush=True)
    for size in (4096, 8192):
        a = cupy.random.standard_normal((size, size), dtype=cupy.float32)
        b = cupy.random.standard_normal((size, size), dtype=cupy.float32)
        if mode == "bf16":
            a, b = ((x.view(cupy.uint32) >> 16).astype(cupy.uint16) for x in (a, b))
        c = cupy.empty((size, size), cupy.float32)
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        times = {}
        for label, call in (("07", lambda: run(functions, shared, p, a, b, c, buffers)),
                            ("cublas", (lambda: cupy.matmul(a, b, out=c)) if mode == "tf32" else None)):
            if call is None:
                continue
            for _ in range(3):
                call()
            best = []
            for _ in range(5):
                start.record(stream)
                for _ in range(10):
                    call()
                end.record(stream)
                end.synchronize()
                best.append(cupy.cuda.get_elapsed_time(start, end) / 10 * 1e-3)
            times[label] = min(best)
        flops = 2 * size ** 3
        print(f"  {size}: " + ", ".join(f"{k} {flops / t / 1e12:.1f} TFLOP/s" for k, t in times.items())
              + (f", 07 at {100 * times['cublas'] / times['07']:.1f}% of cuBLAS TF32" if "cublas" in times else ""),
              flush=True)
sys.exit(0)

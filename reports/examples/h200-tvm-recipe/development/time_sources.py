"""TVM rung 05 in dynamic shared memory (sources generated off the node by TVM 0.27): compiled here by the node's
NVRTC in parallel, checked against cuBLAS's product, timed at 4096 and 8192 beside cuBLAS. Development aid."""
import json, os, sys, tempfile, time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
import cupy, numpy

HERE = Path(__file__).parent
KERNELS = json.load(open(HERE / "kernels.json"))

def options():
    inc = Path(cupy.__file__).parent / "_core" / "include" / "cupy" / "_cccl"
    cuda = os.environ.get("CUDA_PATH", "/usr/local/cuda")
    return ("-std=c++17", f"-I{inc}/cub", f"-I{inc}/thrust", f"-I{inc}/libcudacxx", f"-I{cuda}/include")

def compile_one(i):
    from cupy.cuda import compiler
    t = time.time()
    cubin, _ = compiler.compile_using_nvrtc(KERNELS[i]["source"], options(), arch="90")
    path = f"/tmp/tvmdyn-{i}.cubin"
    Path(path).write_bytes(cubin)
    sys.path.insert(0, os.environ.get('REPO', '.'))
    from kernels import sass
    facts = {k.replace('sass_', ''): v for k, v in sass.facts(cubin).items()}
    return i, path, time.time() - t, facts

if __name__ == "__main__":
    print("nvrtc", cupy.cuda.nvrtc.getVersion(), flush=True)
    t0 = time.time()
    with ProcessPoolExecutor(16) as pool:
        built = {i: (path, s, f) for i, path, s, f in pool.map(compile_one, range(len(KERNELS)))}
    print(f"compiled {len(built)} in {time.time() - t0:.0f} s", flush=True)
    stream = cupy.cuda.Stream(non_blocking=True)
    def timeit(fn, reps):
        e0, e1 = cupy.cuda.Event(), cupy.cuda.Event()
        fn(); stream.synchronize(); e0.record(stream)
        for _ in range(reps): fn()
        e1.record(stream); e1.synchronize()
        return cupy.cuda.get_elapsed_time(e0, e1) / reps / 1e3
    for n in (4096, 8192):
        a = cupy.random.standard_normal((n, n), dtype=cupy.float32); b = cupy.random.standard_normal((n, n), dtype=cupy.float32)
        c = cupy.empty((n, n), dtype=cupy.float32); ref = cupy.empty_like(c)
        cupy.cuda.Device().synchronize()
        with stream: cupy.matmul(a, b, out=ref)
        reps = {4096: 30, 8192: 6}[n]
        def cub():
            with stream: cupy.matmul(a, b, out=c)
        base = timeit(cub, reps)
        print(f"{n} cublas {2 * n**3 / base / 1e12:.2f} TFLOP/s", flush=True)
        for i, k in enumerate(KERNELS):
            if k["n"] != n: continue
            f = cupy.RawModule(path=built[i][0]).get_function(k["name"])
            if k["dyn"]: f.max_dynamic_shared_size_bytes = k["dyn"]
            launch = lambda: f(tuple(k["grid"]), tuple(k["block"]), (a, b, c), stream=stream, shared_mem=k["dyn"])
            with stream: c.fill(numpy.nan)
            launch(); stream.synchronize()
            err = float(cupy.max(cupy.abs(c - ref)) / cupy.max(cupy.abs(ref)))
            s = timeit(launch, reps)
            p = {x: y for x, y in k["params"].items() if not x.startswith("KO")}
            print(f"{n} {k['tag']:13s} {json.dumps(p):70s} {built[i][2]} regs {f.num_regs:3d} local {f.local_size_bytes} dyn {k['dyn']:6d} "
                  f"compile {built[i][1]:5.0f}s err {err:.1e} {2 * n**3 / s / 1e12:6.2f} TFLOP/s {100 * base / s:5.1f}%", flush=True)
        base2 = timeit(cub, reps)
        print(f"{n} cublas again {100 * base / base2:.1f}% of first", flush=True)

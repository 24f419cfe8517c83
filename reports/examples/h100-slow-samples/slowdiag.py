"""What makes a sample slow: cuBLAS fp32 GEMMs timed as the harness times them (CudaBackend.device_time: events
behind a blocking kernel), while something else happens on the box. Prints one JSON line per condition."""
import json, os, subprocess, sys, time
import numpy as np
import cupy as cp
from gemmbench.measure.cuda_device import CudaBackend

b = CudaBackend()
SECONDS = float(os.environ.get("DIAG_S", "8"))
PY = sys.executable
DISTURB = {
    "none": None,
    "nvidia-smi": "while true; do nvidia-smi >/dev/null 2>&1; done",
    "nvidia-smi-q": "while true; do nvidia-smi -q >/dev/null 2>&1; done",
    "nvml-init": f"{PY} .dev/diag_nvml.py",
    "context-idle": f"{PY} -c 'import cupy,time; cupy.zeros(1); time.sleep(3600)'",
    "context-churn": f"while true; do {PY} -c 'import cupy; cupy.zeros(1)'; done",
    "module-load": f"{PY} .dev/diag_module.py",
    "cpu-load": f"for i in $(seq 16); do {PY} -c 'while True: pass' & done; wait",
}

def measure(n, seconds, watch):
    a = cp.random.rand(n, n, dtype=cp.float32); w = cp.random.rand(n, n, dtype=cp.float32); c = cp.empty_like(a)
    run = lambda: cp.matmul(a, w, out=c)
    for _ in range(5): run()
    b.synchronize()
    times, stamps, start = [], [], time.perf_counter()
    ctx = b.watch() if watch else None
    if ctx: ctx.__enter__()
    while time.perf_counter() - start < seconds:
        stamps.append(time.perf_counter() - start)
        times.append(b.device_time(run))
    clocks = ctx.summary() if ctx and not ctx.__exit__(None, None, None) else {}
    x = np.array(times); med = float(np.median(x))
    slow = [(round(s, 3), round(t / med, 2)) for s, t in zip(stamps, times) if t > 1.2 * med]
    return {"n": n, "samples": len(x), "median_ms": med * 1e3, "slow": len(slow), "max_ratio": float(x.max() / med),
            "first_slow": slow[:6], "clock_min": clocks.get("sm_clock_min_mhz"), "slowdown": clocks.get("slowdown")}

conditions = sys.argv[1:] or list(DISTURB)
for name in conditions:
    watch = not name.endswith("-nowatch")
    cmd = DISTURB[name.removesuffix("-nowatch")]
    p = subprocess.Popen(["bash", "-c", cmd], start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) if cmd else None
    time.sleep(2.5 if p else 0)
    try:
        for n in (8192, 1024):
            print(json.dumps({"condition": name, **measure(n, SECONDS / 2, watch)}), flush=True)
    finally:
        if p:
            os.killpg(p.pid, 9); p.wait()
        time.sleep(1)

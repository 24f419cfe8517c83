"""Where arrays live and how time is read: NumPy on the CPU, CuPy on a CUDA GPU.

Both backends offer the same operations, so validation and timing are one code path for every family.
"""
from __future__ import annotations

import contextlib
import hashlib
import math
import os
import platform
import re
import socket
import threading
import time
from pathlib import Path

import numpy as np

from gemmbench.files import read_json, write_json
from gemmbench.measure import provenance
from kernels.registry import OPERAND_DTYPE

# FLOP per clock per SM by compute capability: FP32 FFMA lanes x 2, and the dense tensor-core rates of TF32 and of
# BF16 (twice TF32's on every part listed). Where a family's parts differ (consumer Blackwell halves BF16 with FP32
# accumulation on some), the highest is listed: the peak bounds what a timing may claim. A compute capability not
# listed has no known peak: its rows say the gate is unchecked.
FLOP_PER_CLOCK_PER_SM = {
    "7.0": {"fp32": 128}, "7.5": {"fp32": 128},
    "8.0": {"fp32": 128, "tf32": 1024, "bf16": 2048}, "8.6": {"fp32": 256, "tf32": 256, "bf16": 512},
    "8.7": {"fp32": 256, "tf32": 512, "bf16": 1024}, "8.9": {"fp32": 256, "tf32": 256, "bf16": 512},
    "9.0": {"fp32": 256, "tf32": 2048, "bf16": 4096},
    "10.0": {"fp32": 256, "tf32": 4096, "bf16": 8192}, "10.3": {"fp32": 256, "tf32": 4096, "bf16": 8192},
    "11.0": {"fp32": 256, "tf32": 4096, "bf16": 8192},
    "12.0": {"fp32": 256, "tf32": 512, "bf16": 1024}, "12.1": {"fp32": 256, "tf32": 512, "bf16": 1024},
}

# A CPU's bound: logical cores x FP32 lanes of its widest vector unit x 2 FMA pipes per core x 2 FLOP per FMA x its
# highest clock (cpufreq's maximum, else CPU_CLOCK_BOUND_HZ, above any shipping core's boost). Hyper-threads share
# their core's pipes, so counting them keeps this an upper bound; BF16 dot-product units may double it.
CPU_FMA_PIPES = 2
CPU_CLOCK_BOUND_HZ = 6.5e9


def cpu_peak() -> tuple[dict, str]:
    """({mode: TFLOP/s}, how it was bounded) for this host's CPU."""
    flags = ""
    try:
        flags = next((line for line in open("/proc/cpuinfo") if line.startswith(("flags", "Features"))), "")
    except OSError:
        pass
    words = set(flags.split(":", 1)[-1].split())
    lanes, unit = (16, "AVX-512") if "avx512f" in words else (8, "AVX2") if "avx2" in words or "avx" in words else \
        (4, "128-bit SIMD")
    clock_hz, clock = CPU_CLOCK_BOUND_HZ, "the 6.5 GHz bound (no cpufreq maximum readable)"
    try:
        cpus = Path("/sys/devices/system/cpu")
        khz = max(int(p.read_text()) for p in cpus.glob("cpu[0-9]*/cpufreq/cpuinfo_max_freq"))
        clock_hz, clock = khz * 1e3, f"cpufreq's maximum {khz / 1e6:.2f} GHz"
    except (OSError, ValueError):  # no cpufreq (most VMs): the bound
        pass
    cores = os.cpu_count() or 1
    fp32 = cores * lanes * CPU_FMA_PIPES * 2 * clock_hz / 1e12
    basis = f"{cores} logical cores x {lanes} FP32 lanes ({unit}) x {CPU_FMA_PIPES} FMA pipes x 2 x {clock}"
    return {"fp32": fp32, "tf32": fp32, "bf16": 2 * fp32}, basis


def bf16_bits(xp, x):
    """float32 → bfloat16 bit patterns (uint16), rounded to nearest, ties to even (finite inputs)."""
    bits = x.view(xp.uint32)
    return ((bits + xp.uint32(0x7FFF) + ((bits >> 16) & xp.uint32(1))) >> 16).astype(xp.uint16)


def widened(xp, x):
    """An operand as float64: float32 as it is, bfloat16 bits (uint16) exactly."""
    if x.dtype == xp.uint16:
        return (x.astype(xp.uint32) << 16).view(xp.float32).astype(xp.float64)
    return x.astype(xp.float64)


def seed_for(base_seed: int, *sizes: int) -> int:
    """Inputs depend on (seed, shape) only: fresh per shape, identical for every variant."""
    return int(np.random.SeedSequence([base_seed, *sizes]).generate_state(1)[0])


EXPONENT_RANGE = 12  # validation inputs: rows of the first operand and columns of the last scaled by 2^e, |e| <= this


def _row_and_column_scales(xp, rng, shapes: list[tuple]):
    """Powers of two for the first operand's rows and the last operand's columns: every product summed into one
    element shares its row's and column's factor, so an honest product's error scales with it exactly, while one
    that adds rows or columns of unlike scale (a Strassen-type product) loses the small ones."""
    rows = 2.0 ** rng.integers(-EXPONENT_RANGE, EXPONENT_RANGE + 1, size=shapes[0][0])
    columns = 2.0 ** rng.integers(-EXPONENT_RANGE, EXPONENT_RANGE + 1, size=shapes[-1][1])
    return xp.asarray(rows, dtype=xp.float32)[:, None], xp.asarray(columns, dtype=xp.float32)[None, :]


def _residuals(y, z, s2) -> tuple:
    """Freivalds' test's two numbers from y = C·x, z = A·(B·x) and s2 = A²·(B²·1) (each row's sum of squared
    scales): the largest |y − z| of a row over its root-sum-square of scales, and ‖y − z‖ / ‖z‖ (the GPU's
    `residuals` kernel computes the same)."""
    d = y - z
    rows = np.abs(d) / np.sqrt(np.where(s2 > 0, s2, np.finfo(np.float64).tiny))
    norm = np.linalg.norm(z)
    return np.max(rows), np.linalg.norm(d) / (norm if norm > 0 else 1.0)


class Backend:
    """Array namespace `xp`, inputs, NaN-poisoned outputs, fp64 reference, clocks, facts."""

    device = "cpu"
    xp = np
    stream = None  # what a variant's run queues its work on (a CPU has none)
    TIMER_RESOLUTION_S = time.get_clock_info("perf_counter").resolution

    def inputs(self, shapes: list[tuple], seed: int, mode: str = "fp32", scaled: bool = False) -> list:
        """Operands stored as `mode` says (registry.OPERAND_DTYPE), the same values in every mode up to rounding;
        `scaled`: the first operand's rows and the last one's columns multiplied by powers of two from 2^-12 to 2^12
        (validation's inputs)."""
        rng = self.xp.random.default_rng(seed)
        # Uniform in [-1, 1): random signs and magnitudes, never all zeros or ones.
        values = [rng.random(shape, dtype=self.xp.float32) * 2 - 1 for shape in shapes]
        if scaled:
            rows, columns = _row_and_column_scales(self.xp, np.random.default_rng(seed), shapes)
            values[0] *= rows
            values[-1] *= columns
        return [bf16_bits(self.xp, x) for x in values] if OPERAND_DTYPE[mode] == "uint16" else values

    def fill_random(self, x, key: int) -> None:
        """Fresh content for an operand, in place: uniform in [-1, 1) from `key` alone (the same key, the same
        content), stored as x's dtype says (float32, or bfloat16 bits)."""
        rng = np.random.Generator(np.random.Philox(key))
        if x.dtype == np.float32:
            rng.random(out=x.reshape(-1), dtype=np.float32)
            x *= 2
            x -= 1
        else:
            x[...] = bf16_bits(np, rng.random(x.shape, dtype=np.float32) * 2 - 1)

    def project_inputs(self, operands: list, n: int, key: int) -> tuple:
        """The inputs' half of Freivalds' test, queued before the launch (a variant that then writes its inputs
        cannot make its output agree): x of random signs from `key` (n: the output's columns), z = A·(B·x) along the
        chain of operands (A·B, or A0·B0·B1) and s2 = A²·(B²·1), in float64."""
        x = np.random.Generator(np.random.Philox(key)).integers(0, 2, n) * 2.0 - 1.0
        z, s2 = x, np.ones_like(x)
        for m in reversed(operands):
            wide = widened(np, m)
            z = wide @ z
            s2 = np.square(wide, out=wide) @ s2
        return x, z, s2

    def project_output(self, out, projected: tuple, into) -> None:
        """The output's half, queued after the launch: y = C·x against z, into the two-element `into`
        (_residuals). O(n²) in all, where the product is O(n³)."""
        x, z, s2 = projected
        into[:] = _residuals(out.astype(np.float64) @ x, z, s2)

    def digest(self, x, salt: int) -> int:
        """A keyed hash of x's bytes (the harness's references are checked against theirs before each use)."""
        data = np.ascontiguousarray(x).view(np.uint8).reshape(-1)
        return int.from_bytes(hashlib.blake2b(data, digest_size=8, key=salt.to_bytes(8, "little")).digest(), "little")

    GUARD_ELEMENTS = 4096  # NaN-poisoned elements before and after every output: a store past either end shows

    def poisoned_output(self, shape: tuple) -> tuple:
        """(output, guarded buffer): a NaN-filled output inside a NaN-filled buffer with guard bands on both
        sides, so that a kernel writing past its output (into what would be the pool's slack) is seen."""
        size = math.prod(shape)
        buffer = self.xp.full(size + 2 * self.GUARD_ELEMENTS, self.xp.nan, dtype=self.xp.float32)
        return buffer[self.GUARD_ELEMENTS:self.GUARD_ELEMENTS + size].reshape(shape), buffer

    def outside_writes(self, buffer) -> int:
        """Guard-band elements of `buffer` (from poisoned_output) that are no longer NaN."""
        guards = self.xp.concatenate([buffer[:self.GUARD_ELEMENTS], buffer[-self.GUARD_ELEMENTS:]])
        return int(self.xp.count_nonzero(~self.xp.isnan(guards)))

    def errors(self, reference, c, scale=None) -> dict:
        """Relative Frobenius error, max element error and unwritten (NaN) count against an fp64 reference; with
        `scale` (per element, see Workload.scale), the largest element error relative to its own scale."""
        xp = self.xp
        written = ~xp.isnan(c)
        diff = xp.abs(xp.where(written, c.astype(xp.float64) - reference, 0))
        ref_norm = float(xp.linalg.norm(reference))
        errors = {
            "unwritten": int(c.size - int(xp.count_nonzero(written))),
            "nonfinite": int(c.size - int(xp.count_nonzero(xp.isfinite(c)))),
            "rel_error": float(xp.linalg.norm(diff)) / ref_norm if ref_norm else 0.0,
            "max_abs_error": float(xp.max(diff)) if c.size else 0.0,
            "max_abs_reference": float(xp.max(xp.abs(reference))) if c.size else 0.0,
        }
        if scale is not None:
            scaled = xp.where(scale > 0, diff / xp.where(scale > 0, scale, 1), xp.where(diff > 0, xp.inf, 0))
            errors["max_scaled_error"] = float(xp.max(scaled)) if c.size else 0.0
        return errors

    def synchronize(self) -> None:
        pass

    def to_host(self, x):
        return np.asarray(x)

    def host_time(self, run) -> float:
        start = time.perf_counter()
        run()
        self.synchronize()
        return time.perf_counter() - start

    def device_time(self, run, launches: int = 1) -> float:
        """Seconds for `launches` calls in a row (wall time on a CPU)."""
        start = time.perf_counter()
        for _ in range(launches):
            run()
        self.synchronize()
        return time.perf_counter() - start

    def flush_cache(self) -> None:
        scratch = getattr(self, "_scratch", None)
        if scratch is None:
            size = os.sysconf("SC_LEVEL3_CACHE_SIZE") if "SC_LEVEL3_CACHE_SIZE" in os.sysconf_names else 0
            scratch = self._scratch = np.empty(2 * max(size, 64 << 20) // 4, dtype=np.float32)
        scratch.fill(1.0)

    def telemetry(self) -> dict:
        return {}

    def watch(self) -> "ClockWatch":
        """Clocks over a measurement window (nothing to read on a CPU)."""
        return ClockWatch(None)

    def runs_outside_stream(self, run, out) -> str | None:
        """Why `run` does work that the timing's stream does not order, or None (a CPU has no streams)."""
        return None

    def device_busy(self) -> str | None:
        """Why the device is not idle between points (a CPU's threads are watched by measure/guard.py)."""
        return None

    COPY_BYTES = 256 << 20

    def facts(self, cache_dir: str | None = None) -> dict:
        """What the device is, and its measured copy bandwidth: measured once per device (and driver) and kept in
        `cache_dir`, so the many workers of a run do not each spend a second on it."""
        facts = self.identity()
        key = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{facts['gpu_uuid']}-{facts.get('driver', '')}")
        path = Path(cache_dir) / "devices" / f"{key}.json" if cache_dir else None
        if path and path.exists():
            facts["copy_bandwidth_gbps"] = read_json(path)["copy_bandwidth_gbps"]
        else:
            facts["copy_bandwidth_gbps"] = copy_bandwidth_gbps(self, self.COPY_BYTES)
            if path:
                write_json(path, {"copy_bandwidth_gbps": facts["copy_bandwidth_gbps"]})
        return facts

    def identity(self) -> dict:
        peak, basis = cpu_peak()
        return {
            "device": "cpu",
            "gpu": cpu_model(),
            "gpu_uuid": socket.gethostname(),
            "host": socket.gethostname(),
            "cpu": cpu_model(),
            "cores": os.cpu_count(),
            "peak_tflops": peak,
            "peak_basis": basis,
            "versions": provenance.toolchain(),
        }


def cpu_model() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()




def copy_bandwidth_gbps(backend, nbytes: int, repeats: int = 5) -> float:
    """Measured device-memory ceiling: bytes read plus written by a large copy, best of a few."""
    xp = backend.xp
    src = xp.ones(nbytes // 4, dtype=xp.float32)
    dst = xp.empty_like(src)
    best = min(backend.device_time(lambda: xp.copyto(dst, src)) for _ in range(repeats))
    return 2 * nbytes / best / 1e9


# The harness's own kernels for the checks: fresh operand content from a key (splitmix64 of the element's index),
# Freivalds' matrix-vector products in float64 (a warp per row, the matrix read once for M·v and M²·w), their
# residuals (one block), and a keyed hash of a buffer's words.
CHECK_KERNELS = r"""
__device__ __forceinline__ unsigned long long mix(unsigned long long z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
__device__ __forceinline__ float uniform(unsigned long long key, unsigned long long i) {
    return (float)(mix(key + (i + 1) * 0x9E3779B97F4A7C15ull) >> 40) * 0x1p-23f - 1.0f;  // 24 bits: exact in fp32
}
extern "C" __global__ void fill_f32(float* x, unsigned long long n, unsigned long long key) {
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) x[i] = uniform(key, i);
}
extern "C" __global__ void fill_bf16(unsigned short* x, unsigned long long n, unsigned long long key) {
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        const unsigned int bits = __float_as_uint(uniform(key, i));
        x[i] = (unsigned short)((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);  // round to nearest even
    }
}
extern "C" __global__ void signs(double* x, unsigned long long n, unsigned long long key) {
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x)
        x[i] = (mix(key ^ (i * 0xD6E8FEB86659FD93ull)) & 1) ? 1.0 : -1.0;
}
template <typename T> __device__ __forceinline__ double wide(T v);
template <> __device__ __forceinline__ double wide<float>(float v) { return v; }
template <> __device__ __forceinline__ double wide<unsigned short>(unsigned short v) {
    return __uint_as_float((unsigned int)v << 16);
}
template <typename T>
__device__ void matvec2(const T* m, long long rows, long long cols, const double* v, const double* w, double* mv,
                        double* m2w) {
    const long long row = (blockIdx.x * (long long)blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x & 31;
    if (row >= rows) return;
    double a = 0.0, b = 0.0;
    for (long long j = lane; j < cols; j += 32) {
        const double x = wide<T>(m[row * cols + j]);
        a += x * v[j];
        b += x * x * w[j];
    }
    for (int offset = 16; offset; offset >>= 1) {
        a += __shfl_down_sync(0xffffffffu, a, offset);
        b += __shfl_down_sync(0xffffffffu, b, offset);
    }
    if (lane == 0) { mv[row] = a; m2w[row] = b; }
}
extern "C" __global__ void matvec2_f32(const float* m, long long rows, long long cols, const double* v,
                                       const double* w, double* mv, double* m2w) {
    matvec2<float>(m, rows, cols, v, w, mv, m2w);
}
extern "C" __global__ void matvec2_bf16(const unsigned short* m, long long rows, long long cols, const double* v,
                                        const double* w, double* mv, double* m2w) {
    matvec2<unsigned short>(m, rows, cols, v, w, mv, m2w);
}
extern "C" __global__ void residuals(const double* y, const double* z, const double* s2, long long n,
                                     double* into) {
    __shared__ double top[32], dd[32], zz[32];
    double t = 0.0, d2 = 0.0, z2 = 0.0;
    bool nan = false;
    for (long long i = threadIdx.x; i < n; i += blockDim.x) {
        const double d = y[i] - z[i];
        const double r = fabs(d) / sqrt(s2[i] > 0.0 ? s2[i] : 2.2250738585072014e-308);
        nan |= (r != r);
        t = fmax(t, r);
        d2 += d * d;
        z2 += z[i] * z[i];
    }
    if (nan) t = __longlong_as_double(0x7ff8000000000000ll);  // fmax drops NaN; a NaN row must fail
    for (int offset = 16; offset; offset >>= 1) {
        const double o = __shfl_down_sync(0xffffffffu, t, offset);
        t = (o != o || t != t) ? o + t : fmax(t, o);
        d2 += __shfl_down_sync(0xffffffffu, d2, offset);
        z2 += __shfl_down_sync(0xffffffffu, z2, offset);
    }
    if ((threadIdx.x & 31) == 0) { top[threadIdx.x / 32] = t; dd[threadIdx.x / 32] = d2; zz[threadIdx.x / 32] = z2; }
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int w = 1; w < blockDim.x / 32; ++w) {
            t = (top[w] != top[w] || t != t) ? top[w] + t : fmax(t, top[w]);
            d2 += dd[w];
            z2 += zz[w];
        }
        into[0] = t;
        into[1] = sqrt(d2) / (z2 > 0.0 ? sqrt(z2) : 1.0);
    }
}
extern "C" __global__ void digest(const unsigned int* words, unsigned long long n, unsigned long long salt,
                                  unsigned long long* sum) {
    unsigned long long acc = 0;
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) acc += mix(((i << 32) | words[i]) ^ salt);
    for (int offset = 16; offset; offset >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, offset);
    if ((threadIdx.x & 31) == 0) atomicAdd(sum, acc);
}
"""

BLOCKING_KERNEL = r"""
extern "C" __global__ void block_stream(const volatile int* release, volatile int* timed_out,
                                        unsigned long long timeout_ns) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    while (!release[0]) {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
        if (now - start > timeout_ns) { timed_out[0] = 1; return; }
    }
}
"""


class BlockedTooLong(RuntimeError):
    """The variant synchronised with the host inside run(), so its launches cannot be queued and timed."""


class CudaBackend(Backend):
    """CuPy arrays on the current device; device time from CUDA events behind a blocking kernel (nvbench)."""

    device = "cuda"
    BLOCK_TIMEOUT_NS = 10 * 10**9
    TIMER_RESOLUTION_S = 0.5e-6  # cudaEventElapsedTime's documented resolution ("around 0.5 microseconds")

    def __init__(self):
        import cupy

        self.xp = cupy
        self.cupy = cupy
        self.stream = cupy.cuda.Stream(non_blocking=True)
        self._side = cupy.cuda.Stream(non_blocking=True)  # looks at outputs while self.stream is held
        self.stream.use()
        self._flags_mem = cupy.cuda.alloc_pinned_memory(8)  # [release, timed_out], mapped for the device
        self.flags = np.frombuffer(self._flags_mem, dtype=np.int32, count=2)
        self._blocker = cupy.RawKernel(BLOCKING_KERNEL, "block_stream")
        self._checks = cupy.RawModule(code=CHECK_KERNELS, options=("-std=c++17",))
        self._start, self._stop = cupy.cuda.Event(), cupy.cuda.Event()
        device = cupy.cuda.Device()
        self._sms = device.attributes["MultiProcessorCount"]
        self._l2_bytes = device.attributes["L2CacheSize"]
        self._scratch = cupy.empty(2 * self._l2_bytes, dtype=cupy.uint8)
        self._nvml = _nvml_handle(device.pci_bus_id)

    def synchronize(self) -> None:
        self.stream.synchronize()

    def _grid(self, n: int, threads: int = 256) -> tuple:
        return (min(max(1, -(-n // threads)), 8 * self._sms),), (threads,)

    def fill_random(self, x, key: int) -> None:
        name = "fill_f32" if x.dtype == self.cupy.float32 else "fill_bf16"
        self._checks.get_function(name)(*self._grid(x.size), (x, np.uint64(x.size), np.uint64(key)),
                                         stream=self.stream)

    def project_inputs(self, operands: list, n: int, key: int) -> tuple:
        x = self.cupy.empty(n, dtype=self.cupy.float64)
        self._checks.get_function("signs")(*self._grid(n), (x, np.uint64(n), np.uint64(key)), stream=self.stream)
        z, s2 = x, self.cupy.ones(n, dtype=self.cupy.float64)
        for m in reversed(operands):
            z, s2 = self._matvec2(m, z, s2)
        return x, z, s2

    def project_output(self, out, projected: tuple, into) -> None:
        x, z, s2 = projected
        y, _ = self._matvec2(out, x, x)
        self._checks.get_function("residuals")((1,), (1024,), (y, z, s2, np.int64(len(y)), into), stream=self.stream)

    def _matvec2(self, m, v, w):
        """(m·v, (m∘m)·w) in float64."""
        cupy = self.cupy
        rows, cols = m.shape
        mv, m2w = cupy.empty(rows, dtype=cupy.float64), cupy.empty(rows, dtype=cupy.float64)
        name = "matvec2_f32" if m.dtype == cupy.float32 else "matvec2_bf16"
        self._checks.get_function(name)((-(-rows * 32 // 256),), (256,),
                                         (m, np.int64(rows), np.int64(cols), v, w, mv, m2w), stream=self.stream)
        return mv, m2w

    def digest(self, x, salt: int) -> int:
        words = x.reshape(-1).view(self.cupy.uint32)
        into = self.cupy.zeros(1, dtype=self.cupy.uint64)
        self._checks.get_function("digest")(*self._grid(words.size), (words, np.uint64(words.size), np.uint64(salt),
                                                                        into), stream=self.stream)
        return int(into.get(stream=self.stream)[0])

    def to_host(self, x):
        return self.cupy.asnumpy(x)

    @contextlib.contextmanager
    def _held(self):
        """The harness's stream held by a spinning kernel while the block queues work behind it, then released and
        drained; a variant that waited on the device meanwhile is refused."""
        self.flags[:] = 0
        ptr = np.uint64(self._flags_mem.ptr)
        self._blocker((1,), (1,), (ptr, ptr + np.uint64(4), np.uint64(self.BLOCK_TIMEOUT_NS)), stream=self.stream)
        try:
            yield
        finally:
            self.flags[0] = 1
            self.synchronize()
        if self.flags[1]:
            raise BlockedTooLong("the variant waited on the device inside run(); launches cannot be queued")

    def device_time(self, run, launches: int = 1) -> float:
        """Queue start event, the launch(es) and the stop event behind a spinning kernel, then release it:
        the events bracket only device work, never the host's launch overhead."""
        with self._held():
            self._start.record(self.stream)
            for _ in range(launches):
                run()
            self._stop.record(self.stream)
        return self.cupy.cuda.get_elapsed_time(self._start, self._stop) / 1e3

    OUTSIDE_WAIT_S = 0.02  # how long work queued elsewhere gets to show while the harness's stream is held

    def runs_outside_stream(self, run, out) -> str | None:
        """Why `run` does work that the harness's stream does not order (which the events would time as nothing), or
        None. With that stream held by the spinning kernel, the poisoned output must not change (a launch on an
        unrelated stream would change it; a stream of its own looks meanwhile); and once that stream's work is done,
        the output must be complete (work on a side stream that waits on an event of the harness's stream starts only
        when the spinner ends, and the harness's stream does not wait for it). Per-sample Freivalds tests, queued on the
        harness's stream, catch such work too where this look comes too late to see it unfinished."""
        cupy = self.cupy
        out.fill(cupy.nan)
        self.synchronize()
        with self._on_side():  # load the looking kernels now: loading one while the stream is held could wait for it
            cupy.count_nonzero(~cupy.isnan(out)), cupy.count_nonzero(cupy.isnan(out))
            self._side.synchronize()
        with self._held():
            run()
            time.sleep(self.OUTSIDE_WAIT_S)
            with self._on_side():
                written = int(cupy.count_nonzero(~cupy.isnan(out)))
        if written:
            return "the variant's work does not run on the harness's stream"
        with self._on_side():  # the harness's stream is done (_held synchronised it); nothing else is waited for
            unfinished = int(cupy.count_nonzero(cupy.isnan(out)))
        if unfinished:
            return (f"{unfinished} of {out.size} outputs were unwritten when the harness's stream had finished its "
                    f"work (work skipped, or queued on another stream that the harness's stream does not wait for)")
        return None

    @contextlib.contextmanager
    def _on_side(self):
        """CuPy's work in the block on the side stream, then the harness's stream current again. (CuPy 14's `with
        stream:` restores the stream current before it only if that one was entered with `with` too; a stream made
        current by `use()` was left for the null stream, and every later launch went there.)"""
        self._side.use()
        try:
            yield
        finally:
            self.stream.use()

    BUSY_WAIT_S = 2.0

    def device_busy(self) -> str | None:
        """Why the device is not idle between points (work a variant left running on a stream of its own, which
        would share the GPU with the next point's timing), or None: every stream is drained within BUSY_WAIT_S."""
        drained = threading.Event()

        def drain():
            self.cupy.cuda.runtime.deviceSynchronize()
            drained.set()
        start = time.perf_counter()
        threading.Thread(target=drain, daemon=True).start()
        # CuPy may hold the interpreter while it waits, so the wait's own result is not enough: its time is
        if drained.wait(self.BUSY_WAIT_S) and time.perf_counter() - start < self.BUSY_WAIT_S:
            return None
        return f"the device was still busy {self.BUSY_WAIT_S:g} s after the point ended (work a variant left running)"

    def flush_cache(self) -> None:
        self.cupy.cuda.runtime.memsetAsync(self._scratch.data.ptr, 0, self._scratch.nbytes, self.stream.ptr)
        self.synchronize()

    def telemetry(self) -> dict:
        return _nvml_snapshot(self._nvml) if self._nvml else {}

    def watch(self) -> "ClockWatch":
        return ClockWatch(self.telemetry if self._nvml else None)

    COPY_BYTES = 1 << 30

    def identity(self) -> dict:
        import pynvml

        runtime = self.cupy.cuda.runtime
        props = runtime.getDeviceProperties(self.cupy.cuda.Device().id)
        cc = f"{props['major']}.{props['minor']}"
        max_clock = (pynvml.nvmlDeviceGetMaxClockInfo(self._nvml, pynvml.NVML_CLOCK_SM) if self._nvml
                     else props.get("clockRate", 0) / 1e3)
        sm_count = props["multiProcessorCount"]
        from cupy_backends.cuda.libs import cublas
        versions = {**provenance.toolchain(), "cublas": cublas.getVersion(self.cupy.cuda.device.get_cublas_handle())}
        return {
            "device": "cuda",
            "gpu": props["name"].decode() if isinstance(props["name"], bytes) else props["name"],
            "gpu_uuid": pynvml.nvmlDeviceGetUUID(self._nvml) if self._nvml else "",
            "host": socket.gethostname(),
            "cpu": cpu_model(),
            "driver": pynvml.nvmlSystemGetDriverVersion() if self._nvml else "",
            "cuda_driver": runtime.driverGetVersion(),
            "cuda_runtime": runtime.runtimeGetVersion(),
            "compute_capability": cc,
            "sm_count": sm_count,
            "max_sm_clock_mhz": max_clock,
            "l2_bytes": self._l2_bytes,
            "memory_bytes": props["totalGlobalMem"],
            "peak_tflops": {mode: sm_count * rate * max_clock * 1e6 / 1e12
                            for mode, rate in FLOP_PER_CLOCK_PER_SM.get(cc, {}).items()},
            "peak_basis": f"{sm_count} SMs x {max_clock} MHz (max SM clock) x FLOP per clock per SM of {cc}",
            **({} if cc in FLOP_PER_CLOCK_PER_SM else
               {"peak_unknown": f"compute capability {cc} is not in the table of rates: timings are not gated"}),
            "versions": versions,
        }


class ClockWatch:
    """Reads the GPU's telemetry every `interval_s` from a thread while a block runs (sampling), so that a clock
    drop or a slowdown inside the window shows, not only one before and after it. NVML's reads take microseconds
    on the host and none on the device, whose events time the samples."""

    def __init__(self, read, interval_s: float = 0.01):
        self.read, self.interval_s, self.reads = read, interval_s, []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True) if read else None

    def _poll(self) -> None:
        while True:
            self.reads.append(self.read())
            if self._stop.wait(self.interval_s):
                break

    def __enter__(self) -> "ClockWatch":
        if self._thread:
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._thread:
            self._stop.set()
            self._thread.join()
            self.reads.append(self.read())  # the window's end, however short it was

    def summary(self) -> dict:
        """Mean and lowest SM clock over the window, the share of reads with a power or thermal slowdown, and the
        slowdown reasons seen (empty without telemetry)."""
        if not self.reads:
            return {}
        clocks = [r["sm_clock_mhz"] for r in self.reads]
        slowed = [r["slowdown"] for r in self.reads if r["slowdown"]]
        return {"sm_clock_mean_mhz": float(np.mean(clocks)), "sm_clock_min_mhz": float(min(clocks)),
                "slowdown_share": len(slowed) / len(self.reads), "clock_reads": len(self.reads),
                "slowdown": sorted({reason for reasons in slowed for reason in reasons})}


def _nvml_handle(pci_bus_id: str):
    """NVML handle of the CUDA device (matched by PCI bus id, so CUDA_VISIBLE_DEVICES cannot confuse them)."""
    try:
        import pynvml
        pynvml.nvmlInit()
        return pynvml.nvmlDeviceGetHandleByPciBusId(pci_bus_id)
    except Exception:  # NVML absent or refused: telemetry columns stay empty, timing is unaffected
        return None


# Reasons that mean the clock was pulled down by power or heat (idle and app-clock settings are not).
SLOWDOWN_REASONS = {
    0x4: "sw_power_cap", 0x8: "hw_slowdown", 0x20: "sw_thermal", 0x40: "hw_thermal", 0x80: "hw_power_brake",
}


def _nvml_snapshot(handle) -> dict:
    import pynvml

    get_reasons = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
        pynvml.nvmlDeviceGetCurrentClocksThrottleReasons
    reasons = get_reasons(handle)
    return {
        "sm_clock_mhz": pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM),
        "temperature_c": pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU),
        "power_w": pynvml.nvmlDeviceGetPowerUsage(handle) / 1e3,
        "slowdown": [name for bit, name in SLOWDOWN_REASONS.items() if reasons & bit],
    }


def create(device: str) -> Backend:
    return CudaBackend() if device == "cuda" else Backend()

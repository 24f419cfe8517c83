"""Where arrays live and how time is read: NumPy on the CPU (Backend, here), CuPy on a CUDA GPU (cuda_device.py's
CudaBackend, a Backend). Both offer the same operations, so validation and timing are one code path for every
family. Also the devices' facts: peaks, the CPU's model, copy bandwidth, and the seeds of a point's inputs.
"""
from __future__ import annotations

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


MASK64 = (1 << 64) - 1
GOLDEN64 = 0x9E3779B97F4A7C15
KEYS_PER_LAUNCH = 16  # content keys a batch's launch may derive: one per operand, one for its test's signs


def mix64(z: int) -> int:
    """splitmix64's finaliser (cuda_checks.cu's `mix`)."""
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def set_key(base: int, launch: int, index: int) -> int:
    """The content key of input `index` of a sample's launch `launch` (index = its operand count: the signs of its
    test's vector), all from one key drawn per sample: the device derives the same (cuda_checks.cu's `set_key`), so
    a batch's sets are refreshed by one launch per operand, and a drawn sample's inputs are made again from theirs."""
    return mix64((base + (launch * KEYS_PER_LAUNCH + index + 1) * GOLDEN64) & MASK64)


class Sets:
    """The inputs and outputs of a sample's launches (one, or a batch's: each launch its own), refreshed and tested
    together (measure/ledger.py), their content keyed by one key per sample (`base`). Here one launch at a time
    (NumPy); the CUDA backend's do each step for every launch at once."""

    def __init__(self, backend, operands: list[list], outs: list, buffers: list):
        if len(operands[0]) >= KEYS_PER_LAUNCH:
            raise ValueError(f"a launch of {len(operands[0])} operands: at most {KEYS_PER_LAUNCH - 1} are keyed")
        self.backend, self.operands, self.outs, self.buffers = backend, operands, outs, buffers
        self.base = None

    def __len__(self) -> int:
        return len(self.outs)

    def keys(self, launch: int) -> list[int]:
        """The content keys of launch `launch`'s inputs now."""
        return [set_key(self.base, launch, i) for i in range(len(self.operands[launch]))]

    def refresh(self, base: int) -> None:
        """Before the launches: fresh content for every input (keys from `base`), the inputs' half of Freivalds'
        test, every output poisoned."""
        self.base, self._projected = base, []
        for j, (ops, out) in enumerate(zip(self.operands, self.outs)):
            for x, key in zip(ops, self.keys(j)):
                self.backend.fill_random(x, key)
            self._projected.append(self.backend.project_inputs(ops, out.shape[-1], set_key(base, j, len(ops))))
            out.fill(self.backend.xp.nan)

    def project(self, into) -> None:
        """After them: each output's half of the test, into its row of `into` (len(self) rows of two)."""
        for j, out in enumerate(self.outs):
            self.backend.project_output(out, self._projected[j], into[j])


class Backend:
    """Array namespace `xp`, inputs, NaN-poisoned outputs, fp64 reference, clocks, facts."""

    device = "cpu"
    xp = np
    stream = None  # what a variant's run queues its work on (a CPU has none)
    TIMER_RESOLUTION_S = time.get_clock_info("perf_counter").resolution
    # A short kernel is timed by batched samples where one launch per timer pair also times the timer's own gap (CUDA
    # events); a CPU's timer is the call itself, which batched calls would time with their thread pools kept warm
    BATCHES_SHORT_KERNELS = False

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

    def sets(self, operands: list[list], outs: list, buffers: list) -> Sets:
        """The launches of a sample, each with its operands and output (in its guarded buffer)."""
        return Sets(self, operands, outs, buffers)

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

    def nonnegative_product(self, a, b):
        """a·b of two matrices of non-negative terms (a scale's squares, Workload.scale) to a few parts in 10^3:
        here in fp64, as the reference."""
        return a @ b

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


class ClockWatch:
    """Reads the GPU's telemetry every `interval_s` from a thread while a block runs (sampling), so that a clock
    drop or a slowdown inside the window shows, not only one before and after it. NVML's reads take microseconds
    on the host and none on the device, whose events time the samples."""

    def __init__(self, read, interval_s: float = 0.01):
        self.read, self.interval_s, self.reads = read, interval_s, []
        self.seconds = 0.0  # how long the window was open
        self.slowed = False  # whether a read so far saw a power or thermal slowdown
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True) if read else None

    def _poll(self) -> None:
        while True:
            read = self.read()
            self.reads.append(read)
            self.slowed = self.slowed or bool(read["slowdown"])
            if self._stop.wait(self.interval_s):
                break

    def __enter__(self) -> "ClockWatch":
        self._opened = time.perf_counter()
        if self._thread:
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.seconds = time.perf_counter() - self._opened
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

"""The CUDA backend: CuPy arrays on the harness's own stream, CUDA events around launches queued behind a blocking
kernel, the checks' kernels (cuda_checks.cu), NVML's clocks, power and slowdown reasons."""
from __future__ import annotations

import contextlib
import socket
import threading
import time
from pathlib import Path

import numpy as np

from gemmbench.measure import provenance
from gemmbench.measure.devices import FLOP_PER_CLOCK_PER_SM, Backend, ClockWatch, Sets, cpu_model

HERE = Path(__file__).parent
R_32F, COMPUTE_32F_FAST_TF32, GEMM_DEFAULT = 0, 77, -1  # cuBLAS's cudaDataType, cublasComputeType_t, algorithm


class BlockedTooLong(RuntimeError):
    """The variant synchronised with the host inside run(), so its launches cannot be queued and timed."""


class CudaBackend(Backend):
    """CuPy arrays on the current device; device time from CUDA events behind a blocking kernel (nvbench)."""

    device = "cuda"
    BLOCK_TIMEOUT_NS = 10 * 10**9
    TIMER_RESOLUTION_S = 0.5e-6  # cudaEventElapsedTime's documented resolution ("around 0.5 microseconds")
    BATCHES_SHORT_KERNELS = True

    def __init__(self):
        import cupy

        self.xp = cupy
        self.cupy = cupy
        self.stream = cupy.cuda.Stream(non_blocking=True)
        self._side = cupy.cuda.Stream(non_blocking=True)  # looks at outputs while self.stream is held
        self.stream.use()
        self._flags_mem = cupy.cuda.alloc_pinned_memory(8)  # [release, timed_out], mapped for the device
        self.flags = np.frombuffer(self._flags_mem, dtype=np.int32, count=2)
        self._blocker = cupy.RawKernel((HERE / "cuda_blocking.cu").read_text(), "block_stream")
        self._checks = cupy.RawModule(code=(HERE / "cuda_checks.cu").read_text(), options=("-std=c++17",))
        self._functions = {}
        self._start, self._stop = cupy.cuda.Event(), cupy.cuda.Event()
        device = cupy.cuda.Device()
        self._sms = device.attributes["MultiProcessorCount"]
        self._l2_bytes = device.attributes["L2CacheSize"]
        self._scratch = cupy.empty(2 * self._l2_bytes, dtype=cupy.uint8)
        self._nvml = _nvml_handle(device.pci_bus_id)

    def synchronize(self) -> None:
        self.stream.synchronize()

    SHORT_REDUCTION = 64  # reductions shorter than this keep the scale in fp64

    def nonnegative_product(self, a, b):
        """a·b of two matrices of non-negative terms on the TF32 tensor cores, in float32: each term within 2^-9 of
        itself, so their sum is too (a scale needs no more), where fp64 takes as long as the reference's own product.
        A short reduction stays in fp64: a square of a product under about 1e-19 is below float32's range, and an
        element summed from a few such terms would get a scale of 0."""
        if a.shape[1] < self.SHORT_REDUCTION:
            return a @ b
        from cupy_backends.cuda.libs import cublas

        cupy = self.cupy
        a, b = (cupy.ascontiguousarray(x, dtype=cupy.float32) for x in (a, b))
        (m, k), n = a.shape, b.shape[1]
        c = cupy.empty((m, n), dtype=cupy.float32)
        handle, one_zero = cupy.cuda.device.get_cublas_handle(), np.array([1.0, 0.0], dtype=np.float32)
        cublas.setStream(handle, cupy.cuda.get_current_stream().ptr)
        # row-major C = A·B is column-major Cᵀ = Bᵀ·Aᵀ: B first, nothing transposed
        cublas.gemmEx(handle, 0, 0, n, m, k, one_zero.ctypes.data, b.data.ptr, R_32F, n, a.data.ptr, R_32F, k,
                      one_zero.ctypes.data + 4, c.data.ptr, R_32F, n, COMPUTE_32F_FAST_TF32, GEMM_DEFAULT)
        return c

    def _grid(self, n: int, threads: int = 256) -> tuple:
        return (min(max(1, -(-n // threads)), 8 * self._sms),), (threads,)

    def _function(self, name: str):
        function = self._functions.get(name)
        if function is None:
            function = self._functions[name] = self._checks.get_function(name)
        return function

    def fill_random(self, x, key: int) -> None:
        name = "fill_f32" if x.dtype == self.cupy.float32 else "fill_bf16"
        self._function(name)(*self._grid(x.size), (x, np.uint64(x.size), np.uint64(key)), stream=self.stream)

    def sets(self, operands: list[list], outs: list, buffers: list) -> "CudaSets":
        return CudaSets(self, operands, outs, buffers)

    def digest(self, x, salt: int) -> int:
        words = x.reshape(-1).view(self.cupy.uint32)
        into = self.cupy.zeros(1, dtype=self.cupy.uint64)
        self._function("digest")(*self._grid(words.size), (words, np.uint64(words.size), np.uint64(salt),
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
            "power_limit_w": _power_limit_w(self._nvml),
            "l2_bytes": self._l2_bytes,
            "memory_bytes": props["totalGlobalMem"],
            "peak_tflops": {mode: sm_count * rate * max_clock * 1e6 / 1e12
                            for mode, rate in FLOP_PER_CLOCK_PER_SM.get(cc, {}).items()},
            "peak_basis": f"{sm_count} SMs x {max_clock} MHz (max SM clock) x FLOP per clock per SM of {cc}",
            **({} if cc in FLOP_PER_CLOCK_PER_SM else
               {"peak_unknown": f"compute capability {cc} is not in the table of rates: timings are not gated"}),
            "versions": versions,
        }


class CudaSets(Sets):
    """A sample's sets on the device: each step of their refresh and their tests one launch for all of them (a
    batch's 8 steps per launch from Python cost more host time than its short kernels take on the device), matrices
    reached through tables of their pointers, vectors in one array per step (a row per set). Every launch is queued
    on the harness's stream, in order."""

    def __init__(self, backend: CudaBackend, operands: list[list], outs: list, buffers: list):
        super().__init__(backend, operands, outs, buffers)
        cupy = backend.cupy

        def table(arrays):
            return cupy.asarray(np.array([a.data.ptr for a in arrays], dtype=np.uint64))
        count, chain = len(outs), list(reversed(range(len(operands[0]))))  # A·(B·x): the last operand first
        self._tables = [table([ops[i] for ops in operands]) for i in range(len(operands[0]))]
        self._outs = table(outs)
        n = outs[0].shape[-1]
        vectors = lambda length: cupy.empty((count, length), dtype=cupy.float64)  # noqa: E731
        self._x, self._ones = vectors(n), cupy.empty(n, dtype=cupy.float64)
        # each step's (M·v, (M∘M)·w) per set; the last step's are z and s2, kept until the outputs are tested
        self._steps = [(i, vectors(operands[0][i].shape[0]), vectors(operands[0][i].shape[0])) for i in chain]
        self._y, self._y2 = vectors(outs[0].shape[0]), vectors(outs[0].shape[0])

    def refresh(self, base: int) -> None:
        b, nops, self.base = self.backend, len(self.operands[0]), base
        for i, table in enumerate(self._tables):
            x = self.operands[0][i]
            name = "fill_sets_f32" if x.dtype == b.cupy.float32 else "fill_sets_bf16"
            self._launch(name, x.size, (table, np.uint64(x.size), np.uint64(base), np.uint64(i)))
        n = self._ones.size
        self._launch("signs_sets", n, (self._x, self._ones, np.uint64(n), np.uint64(base), np.uint64(nops)))
        v, v_pitch, w, w_pitch = self._x, n, self._ones, 0
        for i, mv, m2w in self._steps:
            self._matvec2(self._tables[i], self.operands[0][i], v, v_pitch, w, w_pitch, mv, m2w)
            v, w = mv, m2w
            v_pitch = w_pitch = mv.shape[1]
        self._launch("poison_sets", self.outs[0].size, (self._outs, np.uint64(self.outs[0].size)))

    def project(self, into) -> None:
        n = self._x.shape[1]
        self._matvec2(self._outs, self.outs[0], self._x, n, self._x, n, self._y, self._y2)
        _, z, s2 = self._steps[-1]
        self.backend._function("residuals")((len(self),), (1024,), (self._y, z, s2, np.int64(z.shape[1]), into),
                                            stream=self.backend.stream)

    def _launch(self, name: str, n: int, args: tuple) -> None:
        """An elementwise kernel over n elements of every set."""
        (blocks,), threads = self.backend._grid(n)
        self.backend._function(name)((blocks, len(self)), threads, args, stream=self.backend.stream)

    def _matvec2(self, table, like, v, v_pitch, w, w_pitch, mv, m2w) -> None:
        rows, cols = like.shape
        name = "matvec2_f32" if like.dtype == self.backend.cupy.float32 else "matvec2_bf16"
        self.backend._function(name)((-(-rows * 32 // 256), len(self)), (256,),
                                     (table, np.int64(rows), np.int64(cols), v, np.int64(v_pitch), w,
                                      np.int64(w_pitch), mv, m2w), stream=self.backend.stream)


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


def _power_limit_w(handle) -> float | None:
    """The board's enforced power limit (the cap whose slowdown flags most throttled points), where NVML says."""
    if not handle:
        return None
    import pynvml

    try:
        return pynvml.nvmlDeviceGetEnforcedPowerLimit(handle) / 1e3
    except pynvml.NVMLError:
        return None

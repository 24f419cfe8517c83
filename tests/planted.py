"""Planted faulty variants for fault-injection tests (registered through config `variant_modules`)."""
import _thread
import gc
import json
import math
import os
import queue
import random
import sys
import threading
import time
from pathlib import Path

import numpy as np

from gemmbench.measure.devices import bf16_bits, widened
from gemmbench.run.rows import VALIDATION_LAUNCHES
from kernels.registry import Built, Variant, register


def _build(mode, params, cache_dir):
    return Built(None, {"compile_s": 0.0})


def _wrong(artifact, a, b, c, stream):
    """Right everywhere except one element: only the max-element check can catch it at large sizes."""
    np.matmul(a, b, out=c)
    c[-1, -1] += 1.0


def _hang(artifact, a, b, c, stream):
    time.sleep(3600)


def _crash(artifact, a, b, c, stream):
    if a.shape[0] > 64:
        os.abort()  # like a segfault in a native kernel: the process dies without a word
    np.matmul(a, b, out=c)


def _slow(artifact, a, b, c, stream):
    time.sleep(0.05)
    np.matmul(a, b, out=c)


class _SlowWarmUp:
    """Honest, but the first calls at a shape (its validation's, which count as its warm-up's, and those after them)
    are slow, as calls are on a host busy with the run's compiles until its samples begin: its warm-up's host times
    lie far above its timed ones."""

    SLOW_CALLS = 5  # after the validation's

    def __init__(self):
        self.calls = {}

    def __call__(self, artifact, a, b, c, stream):
        self.calls[c.shape] = self.calls.get(c.shape, 0) + 1
        if self.calls[c.shape] <= VALIDATION_LAUNCHES + self.SLOW_CALLS:
            time.sleep(0.05)
        np.matmul(a, b, out=c)


class _Stateful:
    """Right on its first calls with an output (as many as validation makes), then returns at once: validation
    passes, the warm-up's later calls and the timed ones do nothing."""

    def __init__(self):
        self.calls = {}

    def __call__(self, artifact, a, b, c, stream):
        key = (c.ctypes.data, c.shape)
        self.calls[key] = self.calls.get(key, 0) + 1
        if self.calls[key] <= VALIDATION_LAUNCHES:
            np.matmul(a, b, out=c)


def tf32_rounded(x, xp=np):
    """`x` rounded to TF32's 10-bit mantissa, as tensor cores read it (xp: NumPy, or CuPy for a GPU array)."""
    return ((x.view(xp.uint32) + xp.uint32(0x1000)) & xp.uint32(0xFFFFE000)).view(xp.float32)


def _tf32_inputs(artifact, a, b, c, stream):
    """Rounds A and B to TF32's 10-bit mantissa, as tensor cores do: not an fp32 product."""
    np.matmul(tf32_rounded(a), tf32_rounded(b), out=c)


def _past_the_end(artifact, a, b, c, stream):
    """Right, and one element more: a store past the end of C, where a pool would have slack."""
    np.matmul(a, b, out=c)
    past = np.ndarray((c.size + 1,), dtype=c.dtype, buffer=c.base, offset=c.ctypes.data - c.base.ctypes.data)
    past[-1] = 0.0


class RareRace:
    """Right, except that on about one launch in 32 (a fixed pseudo-random draw per process) one element of C misses
    its last product term, as a race between two partial sums that fires now and then leaves it."""

    def __init__(self, matmul):
        self.matmul, self.draws = matmul, random.Random(0)

    def __call__(self, artifact, a, b, c, stream):
        self.matmul(a, b, out=c)
        # the same work on every call, the term taken off only when the race fires: a race runs no other kernel when
        # it fires (on a GPU a kernel first loaded then, inside a timed stream, would be a wait, not a wrong product)
        fires = self.draws.random() < 1 / 32
        i, j = c.shape[0] // 2, c.shape[1] // 2
        c[i, j] -= a[i, -1] * b[-1, j] * fires


class _Unobserved:
    """Computes only while the output holds the poison (it was just checked, or is about to be); once it holds a
    result, returns at once. The harness poisons before every timed launch, so this cheat never fires: its time is
    its work's, `WORK_S` at least."""

    WORK_S = 0.005

    def __call__(self, artifact, a, b, c, stream):
        if np.isnan(c).any():
            time.sleep(self.WORK_S)
            np.matmul(a, b, out=c)


class HalfOnceWarm:
    """Right on its first calls at a shape (as many as validation makes), then computes the upper half of C's rows
    only."""

    def __init__(self, matmul_rows=lambda a, b, c, rows: np.matmul(a[:rows], b, out=c[:rows])):
        self.matmul_rows, self.calls = matmul_rows, {}

    def __call__(self, artifact, a, b, c, stream):
        self.calls[c.shape] = self.calls.get(c.shape, 0) + 1
        rows = c.shape[0] if self.calls[c.shape] <= VALIDATION_LAUNCHES else (c.shape[0] + 1) // 2
        self.matmul_rows(a, b, c, rows)


class PointerCache:
    """Keeps each product by its inputs' addresses and shapes, and copies it out when they come again."""

    def __init__(self, copy=np.copyto, matmul=np.matmul, address=lambda x: x.ctypes.data):
        self.copy, self.matmul, self.address, self.kept = copy, matmul, address, {}

    def __call__(self, artifact, a, b, c, stream):
        key = (self.address(a), self.address(b), a.shape, b.shape)
        if key in self.kept:
            self.copy(c, self.kept[key])
        else:
            self.matmul(a, b, out=c)
            self.kept[key] = c.copy()


class RareSwap:
    """Right, except that on every sixteenth launch two elements of C trade places: every value is right, only their
    order is not."""

    def __init__(self, matmul):
        self.matmul, self.calls = matmul, 0

    def __call__(self, artifact, a, b, c, stream):
        self.matmul(a, b, out=c)
        self.calls += 1
        first, last = c[0, 0].copy(), c[-1, -1].copy()  # the same kernels on every call (see RareRace)
        c[0, 0], c[-1, -1] = (last, first) if self.calls % 16 == 0 else (first, last)


class _UnresetCounter:
    """A persistent kernel's tile counter (rows of C taken in turn) that is never reset: the first launch takes every
    row, later ones find none left."""

    def __init__(self):
        self.taken = 0

    def __call__(self, artifact, a, b, c, stream):
        while self.taken < c.shape[0]:
            np.matmul(a[self.taken:self.taken + 1], b, out=c[self.taken:self.taken + 1])
            self.taken += 1


class _LateWork:
    """Hands the product to a thread and returns without waiting, as work queued on another stream: each call's
    result lands when the next call comes."""

    def __init__(self):
        self.pending = None

    def __call__(self, artifact, a, b, c, stream):
        if self.pending:
            self.pending()
        self.pending = lambda: np.matmul(a, b, out=c)


class ContentCache:
    """Keeps each product by a hash of its inputs' content with their signs undone (sign flips and copies at other
    addresses hit it) and replays it, negated where the inputs were: with fresh content before every timed launch it
    never hits, so its time is its work's, `WORK_S` at least."""

    WORK_S = 0.005

    def __init__(self):
        self.kept, self.hits = {}, 0

    def __call__(self, artifact, a, b, c, stream):
        sign = np.sign(a.flat[0]) * np.sign(b.flat[0]) or 1.0
        key = hash((np.abs(a).tobytes(), np.abs(b).tobytes()))
        if key in self.kept:
            self.hits += 1
            np.multiply(self.kept[key], sign, out=c)
        else:
            time.sleep(self.WORK_S)
            np.matmul(a, b, out=c)
            self.kept[key] = c * sign


class _Deferring:
    """Right on its first calls at a shape (as many as validation makes), then hands the product to `defer` and
    returns at once: the work lands after the timer has stopped."""

    def __init__(self):
        self.calls = {}

    def __call__(self, artifact, a, b, c, stream):
        self.calls[c.shape] = self.calls.get(c.shape, 0) + 1
        if self.calls[c.shape] <= VALIDATION_LAUNCHES:
            np.matmul(a, b, out=c)
        else:
            self.defer(lambda: np.matmul(a, b, out=c))


class _ThreadPerCall(_Deferring):
    """A new thread per call computes the product a moment later."""

    @staticmethod
    def defer(work):
        threading.Thread(target=lambda: (time.sleep(0.002), work()), daemon=True).start()


class _PooledThread(_Deferring):
    """One worker thread, started at the first call (before any timing) below Python's threading module, as a native
    runtime's pool would be (threading.enumerate does not list it), computes each product a moment later."""

    def __init__(self):
        super().__init__()
        self.jobs = None

    def defer(self, work):
        if self.jobs is None:
            self.jobs = queue.Queue()
            _thread.start_new_thread(self._serve, ())
        self.jobs.put(work)

    def _serve(self):
        while True:
            work = self.jobs.get()
            time.sleep(0.002)
            work()

    def __call__(self, artifact, a, b, c, stream):
        if self.jobs is None:
            self.defer(lambda: None)  # the pool exists before validation, as a runtime's would
        super().__call__(artifact, a, b, c, stream)


class _HookOnStop(_Deferring):
    """Leaves the product to a profiling hook that runs it when the next C function returns: inside the validation's
    check that is before the comparison; inside a timing, the timer's stop (time.perf_counter) has already returned."""

    def __init__(self):
        super().__init__()
        self.pending = []

    def _hook(self, frame, event, arg):
        if event == "c_return" and self.pending:
            self.pending.pop()()

    def defer(self, work):
        self.pending.append(work)
        if sys.getprofile() is None:
            sys.setprofile(self._hook)

    def __call__(self, artifact, a, b, c, stream):
        self.calls[c.shape] = self.calls.get(c.shape, VALIDATION_LAUNCHES)  # defers from its first call
        super().__call__(artifact, a, b, c, stream)


def _switch_interval(artifact, a, b, c, stream):
    """Right, and sets the interpreter's switch interval to a second: the harness's threads (its clock watch) would
    wait that long for the interpreter."""
    sys.setswitchinterval(1.0)
    np.matmul(a, b, out=c)


def _reference_writer(artifact, a, b, c, stream):
    """Computes a quarter of the sum, then writes its output over the harness's cached fp64 references of this shape
    (and their scales with its own), so a comparison made after it would agree."""
    quarter = a.shape[1] // 4 or 1
    np.matmul(a[:, :quarter], b[:quarter], out=c)
    for found in gc.get_objects():  # the harness's cache, wherever the worker keeps it
        if type(found).__name__ == "References":
            for pair, _ in found.kept.values():
                if pair[0].shape == c.shape:
                    pair[0][...] = c


class _LeavesThread:
    """Right, and leaves a thread behind that keeps the cores busy: whatever is measured after it runs slower."""

    def __init__(self):
        self.started = False

    def __call__(self, artifact, a, b, c, stream):
        if not self.started:
            self.started = True
            spin = np.ones((256, 256), dtype=np.float32)
            threading.Thread(target=lambda: [spin @ spin for _ in iter(int, 1)], daemon=True,
                             name="planted-left-behind").start()
        np.matmul(a, b, out=c)


def bf16_split(x, xp=np):
    """x as the sum of two BF16 numbers (x ≈ high + low), as float32."""
    high = widened(xp, bf16_bits(xp, x)).astype(xp.float32)
    return high, widened(xp, bf16_bits(xp, x - high)).astype(xp.float32)


def _bf16_composed(artifact, a, b, c, stream):
    """An 'fp32' product from BF16 pieces, three BF16 products summed in FP32 (as split-precision tensor-core
    emulations do): about 2^-17 relative a term, not fp32's rounding."""
    (ah, al), (bh, bl) = bf16_split(a), bf16_split(b)
    np.matmul(ah, bh, out=c)
    c += ah @ bl + al @ bh


def strassen(a, b, matmul=np.matmul):
    """One level of Strassen's algorithm (7 products of half size) where every size is even; a plain product else."""
    m, k = a.shape
    n = b.shape[1]
    if m % 2 or n % 2 or k % 2:
        return matmul(a, b)
    h, i, j = m // 2, k // 2, n // 2
    a11, a12, a21, a22 = a[:h, :i], a[:h, i:], a[h:, :i], a[h:, i:]
    b11, b12, b21, b22 = b[:i, :j], b[:i, j:], b[i:, :j], b[i:, j:]
    m1, m2 = matmul(a11 + a22, b11 + b22), matmul(a21 + a22, b11)
    m3, m4 = matmul(a11, b12 - b22), matmul(a22, b21 - b11)
    m5, m6, m7 = matmul(a11 + a12, b22), matmul(a21 - a11, b11 + b12), matmul(a12 - a22, b21 + b22)
    return np.block([[m1 + m4 - m5 + m7, m3 + m5], [m2 + m4, m1 - m2 + m3 + m6]])


def _strassen(artifact, a, b, c, stream):
    """One level of Strassen's algorithm, credited with 2mnk FLOPs: fewer multiplications, and rows of unlike scale
    added together (the small ones lose their digits)."""
    c[...] = strassen(a, b)


# Cheats: each must end with its point not published as `ok` (or, for planted-unobserved and planted-content-cache,
# published with the time of their work), whatever timing config runs it.
CHEATS = {"planted-unobserved": _Unobserved(), "planted-half-once-warm": HalfOnceWarm(),
          "planted-pointer-cache": PointerCache(), "planted-rare-swap": RareSwap(np.matmul),
          "planted-unreset-counter": _UnresetCounter(), "planted-late-work": _LateWork(),
          "planted-content-cache": ContentCache(), "planted-thread-per-call": _ThreadPerCall(),
          "planted-pooled-thread": _PooledThread(), "planted-hook-on-stop": _HookOnStop(),
          "planted-switch-interval": _switch_interval, "planted-reference-writer": _reference_writer,
          "planted-leaves-thread": _LeavesThread(), "planted-bf16-composed": _bf16_composed,
          "planted-strassen": _strassen}

for name, run in {"planted-past-the-end": _past_the_end, "planted-rare-race": RareRace(np.matmul),
                  "planted-wrong": _wrong, "planted-hang": _hang, "planted-crash": _crash, "planted-slow": _slow,
                  "planted-slow-warm-up": _SlowWarmUp(),
                  "planted-stateful": _Stateful(), "planted-tf32-inputs": _tf32_inputs, **CHEATS}.items():
    register(Variant(family="cpu", name=name, device="cpu", modes=("fp32",), build=_build, run=run,
                     description=f"test fault injection: {run.__doc__ or name}"))


def _build_tunable(mode, params, cache_dir):
    if params["delay_ms"] == 13:
        raise ValueError("delay_ms=13 needs more registers than the device has")  # caught only when compiled
    return Built(params["delay_ms"] / 1e3, {"compile_s": 0.0})


def _delayed(artifact, a, b, c, stream):
    time.sleep(artifact)
    np.matmul(a, b, out=c)


register(Variant(family="cpu", name="planted-tunable", device="cpu", modes=("fp32",), build=_build_tunable,
                 run=_delayed, params={"delay_ms": 20}, space={"delay_ms": (0, 13, 20)},
                 description="test tuning: faster with a smaller delay; one candidate is refused at build"))


def _search(mode, shape, trials, work_dir, committed, seed, log, measure):
    """A search of its own, as MetaSchedule's: it proposes rounds of parameter sets and the tune stage measures
    them (13 is refused at build)."""
    measured = []
    for proposed in ([{"delay_ms": 20}, {"delay_ms": 13}], [{"delay_ms": 0}]):
        measured += zip(proposed, measure(proposed))
    median_s, best = min(((row["median_s"], params) for params, row in measured if row["status"] == "ok"),
                         key=lambda found: found[0])
    return {"params": best, "median_s": median_s, "tflops": 2 * math.prod(shape) / median_s / 1e12,
            "trials": len(measured), "records": [row["status"] for _, row in measured]}


register(Variant(family="cpu", name="planted-searching", device="cpu", modes=("fp32",), build=_build_tunable,
                 run=_delayed, params={"delay_ms": 20}, tuner=_search,
                 description="test tuning by a search of its own: proposes, the harness measures"))


def _compile_for_shape(cache_dir, m, n, k):
    """A kernel specialised per shape, 'compiled' into the shared cache (by the process its file names), found there
    when compiled already; it has none for 7x13x5 (and counts its refusals beside the cache)."""
    if (m, n, k) == (7, 13, 5):
        with open(cache_dir.parent / "planted-specialised-refusals", "a") as refusals:
            refusals.write("7x13x5\n")
        raise ValueError("no kernel for 7x13x5")
    kernel = cache_dir / f"{m}x{n}x{k}"
    if not kernel.exists():
        kernel.write_text(str(os.getpid()))


def _build_specialised(mode, params, cache_dir):
    path = os.path.join(cache_dir, "planted-specialised")
    os.makedirs(path, exist_ok=True)
    return Built(Path(path), {"compile_s": 0.0})


def _specialised(artifact, a, b, c, stream):
    _compile_for_shape(artifact, a.shape[0], b.shape[1], a.shape[1])
    np.matmul(a, b, out=c)


register(Variant(family="cpu", name="planted-specialised", device="cpu", modes=("fp32",), build=_build_specialised,
                 run=_specialised, prepare=_compile_for_shape,
                 description="test Variant.prepare: one kernel per shape, compiled ahead by the build"))


def _build_in_cache(mode, params, cache_dir):
    return Built(Path(cache_dir), {"compile_s": 0.0})


class _FailsFirstTime:
    """Skips work once warm (as planted-stateful) in the first process that times it, right ever after: a fault that
    a rerun does not see again."""

    def __init__(self):
        self.calls = {}

    def __call__(self, artifact, a, b, c, stream):
        self.calls[c.shape] = self.calls.get(c.shape, 0) + 1
        fired = artifact / "planted-fails-first-time"
        if self.calls[c.shape] <= VALIDATION_LAUNCHES or (fired.exists() and fired.read_text() != str(os.getpid())):
            np.matmul(a, b, out=c)
        else:
            fired.write_text(str(os.getpid()))


register(Variant(family="cpu", name="planted-fails-first-time", device="cpu", modes=("fp32",), build=_build_in_cache,
                 run=_FailsFirstTime(), description="test: failure history; a fault the first run sees, not later"))


def _bf16_product(artifact, a, b, c, stream):
    """BF16 operands multiplied in FP32, as tensor cores do."""
    np.matmul(widened(np, a).astype(np.float32), widened(np, b).astype(np.float32), out=c)


def _bf16_output(artifact, a, b, c, stream):
    """BF16 operands multiplied in FP32, the output rounded to BF16 on the way out: not what the mode declares."""
    _bf16_product(artifact, a, b, c, stream)
    c[...] = widened(np, bf16_bits(np, c))


for name, run in {"planted-bf16": _bf16_product, "planted-bf16-output": _bf16_output}.items():
    register(Variant(family="cpu", name=name, device="cpu", modes=("bf16",), build=_build, run=run,
                     description=f"test: {run.__doc__}"))

register(Variant(family="cpu", name="planted-tf32-mode", device="cpu", modes=("fp32", "tf32"), build=_build,
                 run=lambda artifact, a, b, c, stream: np.matmul(a, b, out=c),
                 description="test: a variant that declares a tf32 mode"))


def _build_unstable(mode, params, cache_dir):
    """A compiler that now and then allocates registers otherwise, as NVRTC 13.5 does (kernels/machine_code.py), and
    caches what it made where CuPy keeps its cubins: the run's first compile (PLANTED_COMPILES counts them; all of
    them with PLANTED_ALWAYS_ODD) makes a 137-register kernel, the others the 125 of its tuning."""
    cached = Path(cache_dir) / "cupy" / f"planted-{params['delay_ms']}.json"
    if not cached.exists():
        log = Path(os.environ["PLANTED_COMPILES"])
        compiles = len(log.read_text().splitlines()) if log.exists() else 0
        with log.open("a") as out:
            out.write(f"{cache_dir}\n")
        odd = compiles == 0 or os.environ.get("PLANTED_ALWAYS_ODD") == "1"
        cached.parent.mkdir(parents=True, exist_ok=True)
        cached.write_text(json.dumps({"registers": 137 if odd else 125}))
    return Built(params["delay_ms"] / 1e3, {"compile_s": 0.0, **json.loads(cached.read_text())})


register(Variant(family="cpu", name="planted-unstable-compiler", device="cpu", modes=("fp32",), build=_build_unstable,
                 run=_delayed, params={"delay_ms": 0}, space={"delay_ms": (0, 1)},
                 description="test builds: its first compile caches a kernel unlike the one its tuning timed"))


def _build_costly_facts(mode, params, cache_dir):
    """Facts that take seconds to read (a disassembly): each read is a line in PLANTED_FACT_READS."""
    def disassembled():
        with Path(os.environ["PLANTED_FACT_READS"]).open("a") as out:
            out.write("read\n")
        return {"disassembled": True}
    return Built(None, {"compile_s": 0.0}, disassembled)


register(Variant(family="cpu", name="planted-costly-facts", device="cpu", modes=("fp32",), build=_build_costly_facts,
                 run=lambda artifact, a, b, c, stream: np.matmul(a, b, out=c),
                 description="test builds: facts read only where a build record asks for them"))


def _collapses_above_64(artifact, a, b, c, stream):
    """GROUP 16 is the faster up to n = 64 and collapses above; GROUP 8 holds everywhere."""
    time.sleep((0.005 if a.shape[0] <= 64 else 0.1) if artifact == 16 else 0.008)  # far apart: CI hosts are loaded
    np.matmul(a, b, out=c)


register(Variant(family="cpu", name="planted-collapsing", device="cpu", modes=("fp32",),
                 build=lambda mode, params, cache_dir: Built(params["GROUP"], {"compile_s": 0.0}),
                 run=_collapses_above_64, params={"GROUP": 8}, space={"GROUP": (8, 16)},
                 description="test tuning: the fastest at its class collapses at a larger size the class serves"))

"""Runs tasks' points in a child process, either one task (`python -m gemmbench.run.worker TASK.json START
DONE.json`; DONE: the rows of the points before START, from an earlier worker of the same task) or, resident, every
task that jobs send it on a Unix socket (`python -m gemmbench.run.worker --serve SOCKET IDLE_S`) until it has been
idle IDLE_S seconds: the jobs of a run then share one import, one CUDA context and the fp64 references.

It speaks a line protocol on its channel (the original stdout, or the connection; prints from kernels go to stderr):
{"event": "ready", "device": {...}} after the build (for measure, the facts of the device it runs on),
{"event": "start", "index": i}, {"event": "row", "index": i, "row": {...}}; resident, also {"event": "hello",
"pid": ...} first and {"event": "end", "code": ...} last, or {"event": "stale"} where the sources it imported have
changed since (it exits, and the job starts a fresh one).
After a failure on a GPU it exits, because the CUDA context may be unusable; the supervisor starts a fresh one.
"""
from __future__ import annotations

import contextlib
import faulthandler
import json
import os
import random
import socket
import sys
import time
import traceback
from collections import OrderedDict
from pathlib import Path

import numpy as np

from gemmbench import ROOT, tune, workloads
from gemmbench.measure import backend as backends
from gemmbench.measure import checking, guard, provenance, timing
from gemmbench.measure.ledger import Ledger
from gemmbench.run.task import Point, Task, not_timed
from kernels import registry

FATAL_EXIT = 3


def _sender(channel):
    # NumPy scalars (np.bool_, np.float32) from kernels and statistics become plain JSON values.
    plain = lambda value: value.item() if hasattr(value, "item") else str(value)  # noqa: E731

    def send(**msg):
        channel.write(json.dumps(msg, default=plain) + "\n")
        channel.flush()
    return send


def _channel():
    channel = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # anything printed by kernels or libraries goes to stderr, not into the protocol
    sys.stdout = sys.stderr
    return _sender(channel)


OUT_OF_MEMORY = ("out of memory", "out_of_memory", "alloc_failed")  # CuPy, CUDA (Numba), cuBLAS, in lower case


def failure_row(exc: BaseException) -> dict:
    text = f"{type(exc).__name__}: {exc}".strip()
    oom = isinstance(exc, MemoryError) or "OutOfMemory" in type(exc).__name__ or \
        any(words in text.lower() for words in OUT_OF_MEMORY)
    return {"status": "oom" if oom else "error", "message": text[:2000]}


class BuildFailed(RuntimeError):
    pass


_built: dict[str, tuple] = {}  # (variant, mode, params) -> (Built or the ValueError that refused it, compile_s)


def build_once(variant, mode: str, params: dict, cache_dir) -> tuple:
    """A parameter set is compiled once per worker (a Numba compile takes seconds): by size class, tune trial."""
    key = json.dumps([variant.key, mode, params], sort_keys=True)
    if key not in _built:
        start = time.perf_counter()
        try:
            built = variant.build(mode, params, cache_dir)
        except ValueError as exc:  # the variant refuses this parameter set
            built = exc
        _built[key] = built, time.perf_counter() - start
    return _built[key]


class Builds:
    """The task's parameters, or one parameter set per tuned size class (task.classes), each built when first
    needed."""

    def __init__(self, variant, task: Task):
        self.variant, self.mode, self.cache_dir = variant, task.mode, task.cache_dir
        self.params = {size: {**task.params, **params} for size, params in (task.classes or {"": {}}).items()}

    def get(self, size: str) -> tuple[dict, object]:
        try:
            built, _ = build_once(self.variant, self.mode, self.params[size], self.cache_dir)
        except Exception as exc:
            built = exc
        if isinstance(built, Exception):
            raise BuildFailed(f"build failed: {type(built).__name__}: {built}") from built
        return self.params[size], built

    def size_class(self, point: Point) -> str:
        """The class whose kernel runs the point (the nearest tuned size; "" for the task's parameters)."""
        return "" if "" in self.params else tune.pick(self.params, *point.sizes.values())

    def for_point(self, point: Point) -> tuple[dict, object]:
        return self.get(self.size_class(point))


def build_row(variant, task: Task, backend) -> dict:
    start = time.perf_counter()
    builds = Builds(variant, task)
    by_class = {size: builds.get(size)[1] for size in builds.params}
    backend.synchronize()
    # The largest class's facts stand for the build; every class's facts are kept beside them.
    facts = {"compile_s": time.perf_counter() - start, **by_class[max(by_class, key=lambda size: int(size or 0))].facts}
    if task.classes:  # their parameters are in the build record's `tuned` field
        facts["classes"] = {size: b.facts for size, b in by_class.items()}
    facts["toolchain"] = provenance.toolchain()  # as the worker sees it: the versions that compiled this build
    message = "built" + (" (tuned per size class)" if task.classes else "")
    if variant.prepare and (task.prepare or task.refused):
        start, failed, refused = time.perf_counter(), [], dict(task.refused)
        label = workloads.get(variant.workload).label
        for sizes in task.prepare:
            try:
                variant.prepare(builds.for_point(Point(sizes, 0))[1].artifact, *sizes.values())
            except ValueError as exc:  # the variant refuses this shape; its validation reports that, compiling nothing
                refused[label(sizes)] = str(exc)[:300]
            except Exception as exc:  # that shape's validation meets the same error and reports it
                failed.append(f"{label(sizes)}: {type(exc).__name__}: {exc}"[:300])
        facts["prepare_s"] = time.perf_counter() - start
        shapes = len(task.prepare) + len(task.refused)
        message += f"; compiled ahead for {shapes - len(failed) - len(refused)} of {shapes} shapes"
        if refused:
            facts["prepare_refused"] = refused
        if failed:
            facts["prepare_failed"] = failed
    return {"status": "ok", "message": message, **facts}


def _problem(variant, backend, point: Point, mode: str, scaled: bool = False) -> tuple[list, object, object, object]:
    """Inputs for the point's shape (from its seed) stored as `mode` says (`scaled`: rows and columns scaled by powers
    of two, as validation's are), a NaN-poisoned output in its guarded buffer, and the workload's definition."""
    workload = workloads.get(variant.workload)
    return (backend.inputs(workload.operands(point.sizes), point.seed, mode, scaled),
            *backend.poisoned_output(workload.output(point.sizes)), workload)


def profile_row(variant, builds, backend, task: Task, point: Point) -> dict:
    """One launch for a profiler started with profiling off (measure/profile.py): the point's kernels loaded and
    launched once on fresh inputs, then launched again between cudaProfilerStart and cudaProfilerStop, as the bench
    launches them (its stream, hot cache)."""
    params, built = builds.for_point(point)
    operands, out, _, _ = _problem(variant, backend, point, task.mode)
    variant.run(built.artifact, *operands, out, backend.stream)
    backend.synchronize()
    if task.device == "cuda":
        from cupy.cuda import profiler

        profiler.start()
    try:
        variant.run(built.artifact, *operands, out, backend.stream)
        backend.synchronize()
    finally:
        if task.device == "cuda":
            profiler.stop()
    return {"status": "ok", "message": "one launch profiled", "params": json.dumps(params, sort_keys=True)}


class ReferenceChanged(RuntimeError):
    """The harness's fp64 reference no longer has the bytes it was computed with: something in the process wrote it."""


class References:
    """The fp64 references (and scales) this worker computed, newest last, kept within a byte budget: a shape's
    validation in every variant of a mode that a resident worker measures in turn checks against the same product
    (inputs are fixed by seed, shape and mode). Each is kept with a keyed digest of its bytes (the key drawn from the
    operating system), checked before each use: a variant that writes the reference is caught, and the entry is
    computed again for the next."""

    BUDGET_BYTES = 8 << 30  # a 16384² reference and its scale hold 4 GiB; the sweep's shapes together about 6 GiB
    BUDGET_SHARE = 0.1  # and at most this share of the device's memory: the point's own buffers need the rest

    def __init__(self):
        self.kept: OrderedDict = OrderedDict()
        self.budget = self.BUDGET_BYTES
        self.salt = random.SystemRandom().getrandbits(64)

    def _digests(self, backend, pair) -> tuple:
        return tuple(backend.digest(x, self.salt) for x in pair)

    def verify(self, backend, only: tuple | None = None) -> int:
        """How many kept references (or only the pair `only`, as get returned it) no longer match their digests;
        those are dropped, to be computed again for the next."""
        written = [key for key, (pair, digests) in self.kept.items()
                   if (only is None or pair is only) and self._digests(backend, pair) != digests]
        for key in written:
            del self.kept[key]
        return len(written)

    def check(self, backend, pair: tuple) -> None:
        """Raises ReferenceChanged where `pair` (as get returned it) no longer has the bytes it was computed with."""
        if self.verify(backend, pair):
            raise ReferenceChanged("the harness's fp64 reference was written while the variant ran (its digest "
                                   "changed): a variant reached into the harness")

    def get(self, key, compute, backend) -> tuple[tuple, float]:
        """The reference of `key` and the seconds spent computing it here (0: kept from an earlier point)."""
        if key in self.kept:
            self.check(backend, self.kept[key][0])
            self.kept.move_to_end(key)
            return self.kept[key][0], 0.0
        start = time.perf_counter()
        pair = compute()
        self.kept[key] = pair, self._digests(backend, pair)
        while len(self.kept) > 1 and sum(x.nbytes for pair, _ in self.kept.values() for x in pair) > self.budget:
            self.kept.popitem(last=False)
        return pair, time.perf_counter() - start


REFERENCES = References()


def _reference(workload, backend, operands) -> tuple:
    """(the fp64 result of `operands`, each element's scale (Workload.scale)), computed now."""
    wide = [backends.widened(backend.xp, x) for x in operands]
    pair = workload.reference(backend.xp, wide), workload.scale(backend.xp, wide)
    backend.synchronize()
    return pair


def _expected(workload, backend, operands, point: Point, mode: str) -> tuple[tuple, float]:
    """The fp64 reference of `operands` (validation's inputs of the point: its seed, shape and mode fix them) and
    each element's scale, and the seconds spent computing them here (0: computed for an earlier point)."""
    return REFERENCES.get((workload.name, tuple(point.sizes.items()), point.seed, mode),
                          lambda: _reference(workload, backend, operands), backend)


def _checked(expected: tuple, backend, out, buffer, mode: str, k: int) -> tuple[str, str, dict]:
    """(status, message, errors) of `out` against `expected` (reference, scale), and of the guard bands around it
    in `buffer` (None: checked elsewhere), once the device is done."""
    backend.synchronize()
    reference, scale = expected
    errors = backend.errors(reference, out, scale)
    errors["outside_writes"] = backend.outside_writes(buffer) if buffer is not None else 0
    return (*checking.verdict(errors, mode, k, out.size), errors)


VALIDATION_LAUNCHES = 2  # each into a freshly poisoned output: a kernel right only once (or only warm) fails


def validate_row(variant, chosen, backend, task: Task, point: Point) -> dict:
    """The point's shape on inputs with rows and columns scaled over 2^±12, launched twice into a poisoned output,
    each compared in full with the fp64 reference within the mode's error bound (measure/checking.py)."""
    params, built = chosen
    start = time.perf_counter()
    LOAD.begin()
    operands, out, buffer, workload = _problem(variant, backend, point, task.mode, scaled=True)
    k = workload.reduction(point.sizes)
    # before any launch: the variant may write its inputs, and the reference is of the inputs as they were given
    expected, reference_s = _expected(workload, backend, operands, point, task.mode)
    for launch in range(1, VALIDATION_LAUNCHES + 1):
        out.fill(np.nan)
        variant.run(built.artifact, *operands, out, backend.stream)
        backend.synchronize()
        try:  # a variant that wrote the harness's reference while it ran is caught before the comparison
            REFERENCES.check(backend, expected)
        except ReferenceChanged as exc:
            return {"status": "failed", "message": f"launch {launch} of {VALIDATION_LAUNCHES}: {exc}",
                    "params": json.dumps(params)}
        status, message, errors = _checked(expected, backend, out, buffer, task.mode, k)
        if status != "ok":
            message = f"launch {launch} of {VALIDATION_LAUNCHES}: {message}"
            break
    LOAD.end()  # the device was busy: a timing right after it warms up no longer than its stretch asks
    return {"status": status, "message": message, "tolerance": checking.bound(task.mode, k),
            **checking.error_units(errors, task.mode, k), "params": json.dumps(params), **errors,
            "validate_s": time.perf_counter() - start, "fp64_reference_s": reference_s}


class Load:
    """When this worker's current stretch of device work began: points run back to back keep the device busy, so
    the warm-up's seconds (clocks settling under load) are spent once per stretch, not once per point."""

    IDLE_GAP_S = 0.25  # a pause longer than this (a compile, a long first launch) starts a new stretch

    def __init__(self):
        self.since = self.last = None

    def begin(self) -> float:
        now = time.perf_counter()
        if self.last is None or now - self.last > self.IDLE_GAP_S:
            self.since = now
        return self.since

    def end(self) -> None:
        self.last = time.perf_counter()


LOAD = Load()


def bench_row(variant, chosen, backend, task: Task, point: Point, device: dict | None = None) -> dict:
    """Warm-up, then samples of the device time per call, each accounted for (ledger.Ledger: fresh inputs and a
    poisoned output before every sample, Freivalds' test after it, drawn samples compared in full with the fp64
    reference of their inputs; the process watched for hooks and threads meanwhile), and every reported time gated by
    what the device can do (`device`: its facts). A failure means the timed region did not hold the work (a kernel
    that skips work once warm, keeps results by address or content, races now and then, or leaves work for later
    or for another stream)."""
    params, built = chosen
    operands, out, buffer, workload = _problem(variant, backend, point, task.mode)
    k = workload.reduction(point.sizes)
    ledger = Ledger(backend, operands, out, buffer, point.seed)
    run_on = lambda operands, out: variant.run(built.artifact, *operands, out, backend.stream)  # noqa: E731
    run = lambda: run_on(ledger.operands, ledger.out)  # noqa: E731
    start = time.perf_counter()
    ledger.before()
    host_s = timing.warm_up(backend, run, task.timing["warmup_runs"], task.timing["warmup_s"], LOAD.begin)
    outside = backend.runs_outside_stream(run, ledger.out)
    if outside:
        return {"status": "failed", "message": f"not timed: {outside} (its events would time nothing)",
                "params": json.dumps(params)}
    settle_s = timing.settle(backend, run)
    before = backend.telemetry()
    sampling = time.perf_counter()

    def batches(launches):
        launches = ledger.batch(launches)
        return launches, ledger.batch_run(run_on), ledger.before_batch, ledger.after_batch

    with backend.watch() as window:
        ledger.guard = guard.Guard()  # the watch's own thread runs already
        sampler = timing.sample(backend, run, task.timing, task.cache, ledger.before, ledger.after)
        launches, batched = timing.sample_batched(backend, sampler.summary()["median_s"], task.timing, task.cache,
                                                  batches)
        sampled_s = time.perf_counter() - sampling
        checking_start = time.perf_counter()
        audited = _audit(backend, run, ledger, sampled_s)
    after, clocks = backend.telemetry(), window.summary()
    LOAD.end()
    summary = sampler.summary()
    problem = ledger.problem(task.mode, k) or _held_problem(ledger, workload, backend, task.mode, k)
    host_median_s = float(np.median(host_s[1:] or host_s))
    if not problem and backend.device == "cpu" and len(host_s) > HOST_SAMPLES_FOR_AGREEMENT:
        problem = _host_disagrees(summary["median_s"], host_median_s)
    times = {"median_s": summary["median_s"], "min_s": summary["min_s"]}
    if batched:
        times.update(batched_median_s=batched.summary()["median_s"], batched_min_s=min(batched.device_s))
    refused, gate = checking.gate(workload.flops(point.sizes), workload.min_bytes(point.sizes, task.mode), times,
                                  device or {}, task.mode, task.cache)
    if not problem and refused:
        problem = f"timing refused: {refused}"
    slowdown = sorted(set(before.get("slowdown", [])) | set(clocks.pop("slowdown", []))
                      | set(after.get("slowdown", [])))
    clock_drop = bool(before and clocks["sm_clock_min_mhz"] < 0.95 * before["sm_clock_mhz"])
    return {
        "status": "ok",
        "message": f"{summary['samples']} samples, median ±{summary['median_ci_rel']:.2%}"
                   + ("" if summary["converged"] else
                      f", precision target not met (stopped by {summary['stopped_by']})")
                   + (", fewer than min_samples" if summary["thin_median"] else ""),
        **summary, **({"status": "failed", "message": problem} if problem else {}),
        "timing_gate": gate,
        "sm_clock_mhz": before.get("sm_clock_mhz"), "sm_clock_mhz_after": after.get("sm_clock_mhz"),
        "temperature_c": before.get("temperature_c"), "temperature_c_after": after.get("temperature_c"),
        "power_w": before.get("power_w"), "power_w_after": after.get("power_w"), **clocks,
        "throttled": bool(slowdown) or clock_drop,
        "throttle_reasons": ",".join(slowdown + (["sm_clock_dropped"] if clock_drop else [])),
        # the launches before the first timed one (one-time costs) tell nothing about a call's host time
        "host_median_s": host_median_s, "warmup_runs": len(host_s),
        "measure_s": time.perf_counter() - start,  # warm-up, sampling and the checks of what was timed
        "settle_s": settle_s,
        # wall time of sampling beyond the samples' own device time (fresh inputs, poisoning, Freivalds' tests), and
        # of the checks after it: what accounting for every sample costs
        "sampling_overhead_s": sampled_s - sum(sampler.device_s) - (sum(batched.device_s) * launches if batched else 0),
        "check_s": time.perf_counter() - checking_start, "audit_launches": audited,
        "checked_launches": ledger.launches,
        "batch_launches": launches, "batched_median_s": times.get("batched_median_s"),
        "sample_device_s": sampler.device_s, "sample_batched_s": batched.device_s if batched else [],
        "warmup_host_s": host_s, "params": json.dumps(params),
    }


HOST_SAMPLES_FOR_AGREEMENT = 3  # warm-up launches (besides the first) a CPU point needs before its host time is read
HOST_DISAGREEMENT = 3.0  # on a CPU, device and host time of one call are one clock: this far apart, work moved


def _host_disagrees(device_median_s: float, host_median_s: float) -> str | None:
    """On a CPU, the timed region and a call timed from the host (its warm-up) measure the same thing; a device median
    far below the host's means the samples' work ran outside their timed region."""
    if device_median_s * HOST_DISAGREEMENT < host_median_s:
        return (f"the timed median ({device_median_s * 1e3:.3g} ms) is {host_median_s / device_median_s:.3g} times "
                f"below the host's time of a call ({host_median_s * 1e3:.3g} ms, its warm-up): on a CPU the two are "
                f"one clock, so work ran outside the timed region")
    return None


def _audit(backend, run, ledger: Ledger, sampled_s: float) -> int:
    """Launches through the samples' own timed path, each accounted for as a sample is (their times are not kept),
    until the point has AUDIT_LAUNCHES checked launches in a row, for at most AUDIT_MAX_S (measure/timing.py) and no
    longer than its sampling took: a fault that fires once in a few dozen launches shows where a short timing (the
    tune stage's) met its precision in a few samples. Returns how many ran."""
    deadline, ran = time.perf_counter() + min(sampled_s, timing.AUDIT_MAX_S), 0
    while ledger.launches < timing.AUDIT_LAUNCHES and time.perf_counter() < deadline:
        ledger.before()
        backend.device_time(run)
        ledger.after()
        ran += 1
    return ran


def _held_problem(ledger: Ledger, workload, backend, mode: str, k: int) -> str | None:
    """Why a drawn sample's output, compared in full with the fp64 reference of its own inputs, is not their
    product (or its buffers were written outside), or None."""
    for what, inputs, out in ledger.held_outputs():  # copies: their guard bands are the buffers', checked below
        checked, why, _ = _checked(_reference(workload, backend, inputs), backend, out, None, mode, k)
        if checked != "ok":
            return f"the timed launches' output, {what}: {why}"
    outside = sum(backend.outside_writes(b) for b in ledger.buffers())
    if outside:
        return f"the timed launches wrote {outside} elements outside their outputs (the guard bands)"
    return None


def tune_row(variant, backend, task: Task, point: Point, device: dict | None = None) -> dict:
    """One candidate at one class size: compiled, rejected if it spills, validated, then timed briefly."""
    params = {**task.params, **point.params}
    built, compile_s = build_once(variant, task.mode, params, task.cache_dir)
    backend.synchronize()
    row = {"size": point.size_class, "params": point.params, "compile_s": compile_s}
    if isinstance(built, ValueError):  # a candidate lost, not a broken worker
        return {**row, "status": "rejected", "message": str(built)}
    row["registers"] = built.facts.get("registers")
    if built.facts.get("local_bytes"):
        return {**row, "status": "rejected", "message": f"spills {built.facts['local_bytes']} bytes to local memory"}
    checked = validate_row(variant, (params, built), backend, task, point)
    if checked["status"] != "ok":
        return {**row, "status": checked["status"], "message": checked["message"]}
    timed = bench_row(variant, (params, built), backend, task, point, device)
    if timed["status"] != "ok":
        return {**row, "status": timed["status"], "message": timed["message"]}
    return {**row, "status": "ok", "message": timed["message"], "median_s": timed["median_s"],
            "tflops": workloads.get(variant.workload).flops(point.sizes) / timed["median_s"] / 1e12,
            "rel_error": checked["rel_error"], "throttled": timed["throttled"]}


def compile_row(variant, task: Task, point: Point) -> dict:
    """A tune candidate, or a build's size class, compiled (and, for a variant specialised per shape, its kernel for
    the point's shape) into the caches shared by every process, so that the worker that runs it only loads it."""
    start = time.perf_counter()
    try:  # nothing ran on the device, so a failure here leaves the worker usable for the next candidate
        builds = Builds(variant, task)  # a build's compile task carries its size classes
        built, _ = build_once(variant, task.mode, {**builds.params[builds.size_class(point)], **point.params},
                              task.cache_dir)
        if isinstance(built, ValueError):
            return {"status": "rejected", "message": str(built)}
        if variant.prepare:
            variant.prepare(built.artifact, *point.sizes.values())
    except ValueError as exc:  # the variant refuses this shape (or candidate): compiling it again gives the same
        return {"status": "rejected", "message": str(exc)}
    except Exception as exc:
        return failure_row(exc)
    return {"status": "ok", "message": "compiled", "compile_s": time.perf_counter() - start}


def measure_row(variant, builds: Builds, backend, task: Task, point: Point, facts: dict, done: dict) -> dict:
    """A measure task's point: its shape validated, or timed where the point that validated it passed."""
    if point.stage == "validate":
        return validate_row(variant, builds.for_point(point), backend, task, point)
    checked = done.get(point.checked_by, {"status": "missing", "message": "its validation did not report"})
    if checked["status"] != "ok":
        return not_timed(checked)
    return bench_row(variant, builds.for_point(point), backend, task, point, facts)


def _reached_out(threads: frozenset, backend) -> dict:
    """A failed row's status and message where the point left the process otherwise than it found it for the next
    point or variant (`threads`: the Python threads before the task's first point), else nothing."""
    left = guard.left_behind(threads)
    if left:
        return {"status": "failed", "message": f"the variant left {len(left)} thread(s) running after its point "
                                               f"({', '.join(left)[:200]}): they would run on into the next point's "
                                               f"or variant's timing"}
    busy = backend.device_busy()
    if busy:
        return {"status": "failed", "message": f"{busy}: it would share the GPU with the next point's timing"}
    written = REFERENCES.verify(backend)
    if written:
        return {"status": "failed", "message": f"the harness's fp64 references of {written} shape(s) were written "
                                               f"while this point ran (their digests changed): a variant reached into "
                                               f"the harness; they are computed again for the next"}
    return {}


_backends: dict = {}
HARNESS_THREADS: set = set()  # native threads the harness itself started (a device's runtime, a BLAS pool)


def _backend(device: str):
    """One backend (streams, timing kernels, scratch) per device and process: a resident worker's tasks share it."""
    if device not in _backends:
        before = guard.native_threads()
        _backends[device] = backends.create(device)
        HARNESS_THREADS.update(guard.native_threads() - before)
        if device == "cuda":
            total = _backends[device].xp.cuda.Device().mem_info[1]
            REFERENCES.budget = min(References.BUDGET_BYTES, int(References.BUDGET_SHARE * total))
    return _backends[device]


def run(task: Task, start: int, done: dict, send) -> int:
    """The task's points from `start` on (`done`: the rows before it), each reported through `send`; the exit code:
    FATAL_EXIT after a failure that may have left the device unusable."""
    try:
        variant = registry.load(task.variant_modules)[task.variant]
        if task.mode not in variant.modes:  # its kernels would read operands stored as another mode stores them
            raise ValueError(f"{task.variant} does not run in {task.mode} (it declares {', '.join(variant.modes)})")
        if task.mode == "tf32" and os.environ.get("NVIDIA_TF32_OVERRIDE") == "0":
            raise ValueError("NVIDIA_TF32_OVERRIDE=0 is set: it turns TF32 off in cuBLAS, so tf32 rows would be FP32")
        backend = _backend(task.device)
        if task.kind == "build":
            send(event="start", index=0)
            send(event="row", index=0, row=build_row(variant, task, backend))
            return 0
        builds = Builds(variant, task) if task.kind in ("measure", "profile") else None
        # Rows say where they ran: on a box with several GPUs, or a cluster, that is known only here. Timings are
        # checked against these facts (peak, bandwidth).
        facts = None if task.kind == "compile" else backend.facts(task.cache_dir)
    except Exception as exc:  # nothing can run: every remaining point carries the reason
        traceback.print_exc()
        row = failure_row(exc)
        row["message"] = f"build failed: {row['message']}"
        for i in range(start, len(task.points)):
            send(event="row", index=i, row=row)
        return 0
    send(event="ready", device=facts if task.kind in ("measure", "profile") else None)
    threads = guard.python_threads()  # before the variant's first launch
    for i in range(start, len(task.points)):
        send(event="start", index=i)
        try:
            point = task.points[i]
            if task.kind == "compile":
                row = compile_row(variant, task, point)
            elif task.kind == "tune":
                row = tune_row(variant, backend, task, point, facts)
            elif task.kind == "profile":
                row = profile_row(variant, builds, backend, task, point)
            else:
                row = measure_row(variant, builds, backend, task, point, facts, done)
            if row.get("status") == "ok":
                row = {**row, **_reached_out(threads, backend)}
        except Exception as exc:
            traceback.print_exc()
            done[i] = failure_row(exc)
            send(event="row", index=i, row=done[i])
            if task.device == "cuda":
                return FATAL_EXIT
            continue
        done[i] = row
        send(event="row", index=i, row=row)
    return 0


def _done_rows(path) -> dict:
    return {int(i): row for i, row in json.loads(Path(path).read_text()).items()}


def main(task_path: str, start: int, done_path: str) -> int:
    return run(Task.load(task_path), start, _done_rows(done_path), _channel())


def source_stamps(variant_modules=()) -> dict:
    """Size and modification time of every source file this process imported from the project, or from the variant
    modules a task named: a resident worker whose sources changed since it imported them no longer runs what a fresh
    one would."""
    stamps = {}
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if path and (Path(path).is_relative_to(ROOT)
                     or any(name == m or name.startswith(f"{m}.") for m in variant_modules)):
            try:
                stat = os.stat(path)
                stamps[path] = (stat.st_size, stat.st_mtime_ns)
            except OSError:
                stamps[path] = None
    return stamps


def serve(address: str, idle_s: float) -> int:
    """Resident: one task per connection, in turn, until none came for `idle_s` seconds, one failed fatally, or the
    sources changed. The job that connects holds the address's lock meanwhile (supervise.Resident)."""
    _channel()  # kernels' prints to stderr, as in a one-task worker
    faulthandler.enable()  # a crash leaves its cause in the log the job reads
    modules: set[str] = set()
    watched = source_stamps()
    threads = guard.python_threads()
    with contextlib.suppress(FileNotFoundError):
        os.unlink(address)  # left by a worker that was killed
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(address)
        server.listen(1)
        server.settimeout(idle_s)
        while True:
            try:
                conn, _ = server.accept()
            except TimeoutError:  # idle: nothing of it is left behind but its lock
                os.unlink(address)
                Path(address).with_suffix(".log").unlink(missing_ok=True)
                return 0
            conn.settimeout(None)
            with conn, conn.makefile("rw", buffering=1) as stream:
                send = _sender(stream)
                request = json.loads(stream.readline())
                if any(stamp != watched.get(path, stamp) for path, stamp in source_stamps(modules).items()):
                    send(event="stale")
                    return 0
                send(event="hello", pid=os.getpid())
                task = Task.load(request["task"])
                code = run(task, request["start"], _done_rows(request["done"]), send)
                # what the task imported (its variant) is watched too, as it was before the job can go on
                modules.update(task.variant_modules)
                watched = {**source_stamps(modules), **watched}
                differs = _not_fresh(threads)
                if differs:
                    print(f"worker: not reused: {differs}", file=sys.stderr)
                if code or differs:  # no job may connect to it while it exits
                    os.unlink(address)
                send(event="end", code=code)
            if differs:  # a fresh process for the next job (without waiting for whatever still runs here)
                sys.stderr.flush()
                os._exit(code)
            _built.clear()  # compiled kernels are the job's; the references stay for the next variant
            if "cuda" in _backends:  # and the memory the job's arrays held goes back to the device
                _backends["cuda"].xp.get_default_memory_pool().free_all_blocks()
            if code:
                return code


def _not_fresh(threads: frozenset) -> str | None:
    """What a task left in this worker that a fresh one would not have and the next variant would meet: a hook,
    another switch interval or timer, Python threads beyond the harness's own (`threads`: those when it started),
    native threads at work (an idle pool of a variant's runtime stays), or work still running on the device. None:
    the next task may run here."""
    found = guard.tampering()
    if found:
        return found
    left = guard.left_behind(threads)
    if left:
        return f"{len(left)} thread(s) left running ({', '.join(left)[:200]})"
    busy = guard.busy_threads(guard.native_threads() - STARTED_THREADS - HARNESS_THREADS)
    if busy:  # a runtime's idle pool stays; a thread still at work would share the cores with the next timing
        return f"{len(busy)} thread(s) a variant started still running"
    return next((busy for busy in (b.device_busy() for b in _backends.values()) if busy), None)


STARTED_THREADS = guard.native_threads()


if __name__ == "__main__":
    if sys.argv[1] == "--serve":
        sys.exit(serve(sys.argv[2], float(sys.argv[3])))
    sys.exit(main(sys.argv[1], int(sys.argv[2]), sys.argv[3]))

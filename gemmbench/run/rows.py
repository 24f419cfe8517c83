"""The rows a worker computes, one per point of its task: a build, a compile ahead, a validation, a tune trial, a
measure point (validated, or timed by bench.py), a profiled launch; and whether a point left the process otherwise
than it found it."""
from __future__ import annotations

import json
import time

import numpy as np

from gemmbench import workloads
from gemmbench.measure import checking, guard, provenance, timing
from gemmbench.run.bench import bench_row
from gemmbench.run.operands import REFERENCES, ReferenceChanged, compare, kept_reference, operands_of
from gemmbench.run.task import Point, Task, not_timed, pick

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


def clear_builds() -> None:
    """Forget the compiled kernels (a resident worker's next job builds its own; the caches on disk stay)."""
    _built.clear()


class Builds:
    """The task's parameters, or one parameter set per tuned size class (task.classes), each built when first
    needed. The task's own parameters stand under the class None."""

    def __init__(self, variant, task: Task):
        self.variant, self.mode, self.cache_dir = variant, task.mode, task.cache_dir
        self.params = {size: {**task.params, **params} for size, params in (task.classes or {None: {}}).items()}

    def get(self, size: int | None) -> tuple[dict, object]:
        try:
            built, _ = build_once(self.variant, self.mode, self.params[size], self.cache_dir)
        except Exception as exc:
            built = exc
        if isinstance(built, Exception):
            raise BuildFailed(f"build failed: {type(built).__name__}: {built}") from built
        return self.params[size], built

    def size_class(self, point: Point) -> int | None:
        """The class whose kernel runs the point (the nearest tuned size; None for the task's parameters)."""
        return None if None in self.params else pick(self.params, *point.sizes.values())

    def for_point(self, point: Point) -> tuple[dict, object]:
        return self.get(self.size_class(point))


def build_row(variant, task: Task, backend) -> dict:
    start = time.perf_counter()
    builds = Builds(variant, task)
    by_class = {size: builds.get(size)[1] for size in builds.params}
    backend.synchronize()
    # The largest class's facts stand for the build; every class's facts are kept beside them.
    compile_s = time.perf_counter() - start
    facts = {"compile_s": compile_s, **by_class[max(by_class, key=lambda size: size or 0)].all_facts()}
    if task.classes:  # their parameters are in the build record's `tuned` field
        facts["classes"] = {size: b.all_facts() for size, b in by_class.items()}
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


def profile_row(variant, builds, backend, task: Task, point: Point) -> dict:
    """One launch for a profiler started with profiling off (measure/ncu.py): the point's kernels loaded and
    launched once on fresh inputs, then launched again between cudaProfilerStart and cudaProfilerStop, as the bench
    launches them (its stream, hot cache)."""
    params, built = builds.for_point(point)
    operands, out, _, _ = operands_of(variant, backend, point, task.mode)
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


VALIDATION_LAUNCHES = 2  # each into a freshly poisoned output: a kernel right only once (or only warm) fails
TRIAL_VALIDATION_LAUNCHES = 1  # a search's trial: its samples test every launch after it (tune_row)


def validate_row(variant, chosen, backend, task: Task, point: Point, launches: int = VALIDATION_LAUNCHES) -> dict:
    """The point's shape on inputs with rows and columns scaled over 2^±12, launched `launches` times into a poisoned
    output, each compared in full with the fp64 reference within the mode's error bound (measure/checking.py)."""
    params, built = chosen
    start = time.perf_counter()
    timing.LOAD.begin()
    operands, out, buffer, workload = operands_of(variant, backend, point, task.mode, scaled=True)
    k = workload.reduction(point.sizes)
    # before any launch: the variant may write its inputs, and the reference is of the inputs as they were given
    expected, reference_s = kept_reference(workload, backend, operands, point, task.mode)
    host_s = []  # each launch's, as a warm-up's are timed: the timing right after it counts them (Load.launched)
    for launch in range(1, launches + 1):
        out.fill(np.nan)
        backend.synchronize()
        host_s.append(backend.host_time(lambda: variant.run(built.artifact, *operands, out, backend.stream)))
        try:  # a variant that wrote the harness's reference while it ran is caught before the comparison
            REFERENCES.check(backend, expected)
        except ReferenceChanged as exc:
            return {"status": "failed", "message": f"launch {launch} of {launches}: {exc}",
                    "params": json.dumps(params)}
        status, message, errors = compare(expected, backend, out, buffer, task.mode, k)
        if status != "ok":
            message = f"launch {launch} of {launches}: {message}"
            break
    # the device was busy: a timing right after it warms up no longer than its stretch asks, and counts these
    # launches of its kernel at its shape as its warm-up's first
    timing.LOAD.end(built, point.sizes, host_s if status == "ok" else ())
    return {"status": status, "message": message, "tolerance": checking.bound(task.mode, k),
            **checking.error_units(errors, task.mode, k), "params": json.dumps(params), **errors,
            "validate_s": time.perf_counter() - start, "fp64_reference_s": reference_s}


def tune_row(variant, backend, task: Task, point: Point, device: dict | None = None, done: dict | None = None) -> dict:
    """One candidate at one class size: compiled, rejected if it spills, validated, then timed briefly: as one of a
    search's trials (stopped behind the fastest of those before it, `done`: see behind_s), or as its pick
    (Point.stage), which is audited as a measured point is. A trial validates with one launch: each of its samples
    after it (fresh inputs, a poisoned output, Freivalds' test) would catch a kernel right only once; at a large
    shape a launch is the trial's largest cost after its samples. A pick validates as a measured point does."""
    params = {**task.params, **point.params}
    built, compile_s = build_once(variant, task.mode, params, task.cache_dir)
    backend.synchronize()
    row = {"size": point.size_class, "params": point.params, "compile_s": compile_s}
    if isinstance(built, ValueError):  # a candidate lost, not a broken worker
        return {**row, "status": "rejected", "message": str(built)}
    row["registers"] = built.facts.get("registers")
    if built.facts.get("local_bytes"):
        return {**row, "status": "rejected", "message": f"spills {built.facts['local_bytes']} bytes to local memory"}
    tuning = "pick" if point.stage == "pick" else "trial"
    checked = validate_row(variant, (params, built), backend, task, point,
                           VALIDATION_LAUNCHES if tuning == "pick" else TRIAL_VALIDATION_LAUNCHES)
    if checked["status"] != "ok":
        return {**row, "status": checked["status"], "message": checked["message"]}
    timed = bench_row(variant, (params, built), backend, task, point, device, tuning, behind_s(task, point, done or {}))
    if timed["status"] != "ok":
        return {**row, "status": timed["status"], "message": timed["message"]}
    return {**row, "status": "ok", "message": timed["message"], "median_s": timed["median_s"],
            "stopped_by": timed["stopped_by"],
            "tflops": workloads.get(variant.workload).flops(point.sizes) / timed["median_s"] / 1e12,
            "rel_error": checked["rel_error"], "throttled": timed["throttled"],
            # where the trial's seconds went, as the measure jobs' rows say it (present/time_spent.trial_parts)
            "validate_s": checked["validate_s"], **{name: timed[name] for name in TRIAL_TIMES}}


TRIAL_TIMES = ("measure_s", "settle_s", "kernel_s", "sampling_overhead_s", "check_s")  # bench_row's, per trial


def behind_s(task: Task, point: Point, done: dict) -> float:
    """Where a trial stops sampling (timing.Sampler's behind_s): the task's `stop_behind` times the fastest median
    of the trials timed at its shape before it (`done`: the task's rows so far, by index); 0 for a pick, the first
    trial at a shape, or a task without it."""
    ratio = task.timing.get("stop_behind", 0.0)
    timed = [row["median_s"] for i, row in done.items() if row.get("status") == "ok" and row.get("median_s")
             and task.points[i].sizes == point.sizes and task.points[i].stage == point.stage]
    return ratio * min(timed) if ratio and timed and point.stage != "pick" else 0.0


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
    """A measure task's point: its shape validated, or timed where the point that validated it passed. Its load_s:
    the seconds its kernel's build took in this worker (the first point of a size class compiles it, or loads it
    from the run's caches; 0 after)."""
    if point.stage != "validate":
        checked = done.get(point.checked_by, {"status": "missing", "message": "its validation did not report"})
        if checked["status"] != "ok":
            return not_timed(checked)
    start = time.perf_counter()
    chosen = builds.for_point(point)
    load_s = time.perf_counter() - start
    row = validate_row(variant, chosen, backend, task, point) if point.stage == "validate" else \
        bench_row(variant, chosen, backend, task, point, facts)
    return {**row, "load_s": load_s}


def reached_out(threads: frozenset, backend) -> dict:
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

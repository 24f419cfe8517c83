"""A timed point: warm-up, samples of the device time per call, each accounted for (measure/ledger.py), the audit
after them, and every reported time gated by what the device can do."""
from __future__ import annotations

import contextlib
import json
import time
from datetime import datetime, timezone

import numpy as np

from gemmbench.measure import checking, guard, timing
from gemmbench.measure.ledger import HELD, Ledger
from gemmbench.run import gpus
from gemmbench.run.operands import compare, operands_of, reference
from gemmbench.run.task import Point, Task


def bench_row(variant, chosen, backend, task: Task, point: Point, device: dict | None = None,
              tuning: str = "", behind_s: float = 0.0) -> dict:
    """Warm-up, then samples of the device time per call, each accounted for (ledger.Ledger: fresh inputs and a
    poisoned output before every sample, Freivalds' test after it, drawn samples compared in full with the fp64
    reference of their inputs; the process watched for hooks and threads meanwhile), and every reported time gated by
    what the device can do (`device`: its facts). A failure means the timed region did not hold the work (a kernel
    that skips work once warm, keeps results by address or content, races now and then, or leaves work for later
    or for another stream). `tuning`: "trial" for a search's candidate, "pick" for the candidate it picked. Both are
    timed back to back with others at their shape and settle the clocks only where none of them has in this stretch
    of device work (a pick's time is the trial's). A trial has no look for work outside the harness's stream, no
    drawn samples compared in full with their fp64 products (its samples' Freivalds tests stay) and no audit after
    its samples, and it stops behind (`behind_s`, timing.Sampler): the search gives its picks all three, and a pick
    that fails them fails as a trial; the rest are only compared with them."""
    params, built = chosen
    operands, out, buffer, workload = operands_of(variant, backend, point, task.mode)
    k = workload.reduction(point.sizes)
    ledger = Ledger(backend, operands, out, buffer, point.seed, held=0 if tuning == "trial" else HELD)
    run_on = lambda operands, out: variant.run(built.artifact, *operands, out, backend.stream)  # noqa: E731
    run = lambda: run_on(ledger.operands, ledger.out)  # noqa: E731
    # no CUDA context made or destroyed on this GPU meanwhile (a build's worker beside this job): see gpus.quiet
    with gpus.quiet(exclusive=True) if backend.device == "cuda" else contextlib.nullcontext() as quiet_wait_s:
        start = time.perf_counter()
        ledger.before()
        # the device's stretch of work as it stands before the first launch (timing.warm_up): read after it, a long
        # first launch would start a stretch anew and want more launches
        since = timing.LOAD.begin()
        validated = timing.LOAD.launched(built, point.sizes)  # its validation's, just before
        with backend.watch() as warming:
            host_s = timing.warm_up(backend, run, task.timing["warmup_runs"], task.timing["warmup_s"], since,
                                    validated)
        outside = backend.runs_outside_stream(run, ledger.out) if tuning != "trial" else None
        if outside:
            return {"status": "failed", "message": f"not timed: {outside} (its events would time nothing)",
                    "params": json.dumps(params)}
        host_median_s = float(np.median(host_s[1:] or host_s))
        settle_s = timing.settle(backend, run, warming, host_median_s,
                                 spans_caps=task.timing.get("capped_span_s", 0.0) > 0) \
            if not tuning or timing.LOAD.first_at(point.sizes) else 0.0
        before = backend.telemetry()
        sampling = time.perf_counter()

        def batches(launches):
            launches = ledger.batch(launches)
            return launches, ledger.batch_run(run_on), ledger.before_batch, ledger.after_batch

        with backend.watch() as window:
            ledger.guard = guard.Guard()  # the watch's own thread runs already
            short_s = timing.short_s(backend, task.cache)
            slowed = lambda: window.slowed  # noqa: E731
            single = timing.sample(backend, run, task.timing, task.cache, ledger.before, ledger.after, short_s,
                                   slowed=slowed, behind_s=behind_s)
            launches, batched = timing.sample_batched(backend, single.summary()["median_s"], task.timing, task.cache,
                                                      batches, slowed, behind_s)
            if single.stopped_by == "short" and not batched:  # no room to batch: one-launch samples time it
                timing.sample(backend, run, task.timing, task.cache, ledger.before, ledger.after, sampler=single)
            sampled_s = time.perf_counter() - sampling
            kernel_s = sum(single.device_s) + (sum(batched.device_s) * launches if batched else 0)
            checking_start = time.perf_counter()
            audited = 0 if tuning == "trial" else _audit(backend, run, ledger, sampled_s)
        after, clocks = backend.telemetry(), window.summary()
    # a kernel under BATCH_TARGET_S on a GPU is timed by its batched samples (one launch per event pair also times
    # the gap the events leave); its few one-launch samples only sized the batch. On a CPU they stand beside.
    one, many = single.summary(), batched.summary() if batched else None
    headline = batched if batched and short_s else single
    summary = many if headline is batched else one
    # on a CPU, before the ledger's verdict: the calls timed again are timed as samples are, and tested alike
    moved = _host_disagrees(backend, run, summary["median_s"], min(host_s[1:]),
                            lambda: _as_sampled(backend, run, ledger)) \
        if backend.device == "cpu" and len(host_s) > HOST_SAMPLES_FOR_AGREEMENT else None
    problem = ledger.problem(task.mode, k) or _held_problem(ledger, workload, backend, task.mode, k) or moved
    timing.LOAD.end()  # the held outputs' fp64 references kept the device busy too
    times = {"median_s": summary["median_s"], "min_s": summary["min_s"]}
    for name, beside in (("single", one), ("batched", many)):  # every reported time gated
        if beside and beside is not summary:
            times.update({f"{name}_median_s": beside["median_s"], f"{name}_min_s": beside["min_s"]})
    refused, gate = checking.gate(workload.flops(point.sizes), workload.min_bytes(point.sizes, task.mode), times,
                                  device or {}, task.mode, task.cache)
    if not problem and refused:
        problem = f"timing refused: {refused}"
    slowdown = sorted(set(before.get("slowdown", [])) | set(clocks.pop("slowdown", []))
                      | set(after.get("slowdown", [])))
    clock_drop = bool(before and clocks["sm_clock_min_mhz"] < 0.95 * before["sm_clock_mhz"])
    return {
        "status": "ok",
        "message": f"{summary['samples']} samples" + (f" of {launches} launches" if headline is batched else "")
                   + f", median ±{summary['median_ci_rel']:.2%}" + _how_it_ended(summary, task, behind_s),
        **summary, **({"status": "failed", "message": problem} if problem else {}),
        "timing_gate": gate,
        "sm_clock_mhz": before.get("sm_clock_mhz"), "sm_clock_mhz_after": after.get("sm_clock_mhz"),
        "temperature_c": before.get("temperature_c"), "temperature_c_after": after.get("temperature_c"),
        "power_w": before.get("power_w"), "power_w_after": after.get("power_w"), **clocks,
        "throttled": bool(slowdown) or clock_drop,
        "throttle_reasons": ",".join(slowdown + (["sm_clock_dropped"] if clock_drop else [])),
        # the launches before the first timed one (one-time costs) tell nothing about a call's host time
        "host_median_s": host_median_s, "warmup_runs": len(host_s),
        "warmup_validation_launches": len(validated),  # of warmup_runs, those its validation made right before
        "measure_s": time.perf_counter() - start,  # warm-up, sampling and the checks of what was timed
        "settle_s": settle_s,
        # how long the point waited for its GPU to be free of contexts coming and going (NaN: not pinned, or never)
        "quiet_wait_s": quiet_wait_s,
        # wall time of sampling beyond the samples' own device time (fresh inputs, poisoning, Freivalds' tests), and
        # of the checks after it: what accounting for every sample costs
        "sampling_overhead_s": sampled_s - kernel_s,
        "kernel_s": kernel_s,  # the sampled launches' own device time
        "check_s": time.perf_counter() - checking_start, "audit_launches": audited,
        "checked_launches": ledger.launches,
        "batch_launches": launches, "batched_median_s": many["median_s"] if many else None,
        "single_median_s": one["median_s"],  # one launch between the events
        "sample_device_s": single.device_s, "sample_batched_s": batched.device_s if batched else [],
        "warmup_host_s": _kept(host_s), "params": json.dumps(params),
        "measured_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


def _how_it_ended(summary: dict, task: Task, behind_s: float) -> str:
    """What a row's message says of how its sampling ended, where that was not its precision target met."""
    if summary["stopped_by"] == "behind":
        return (f", stopped behind: its fastest sample over {behind_s * 1e3:.4g} ms, "
                f"{task.timing['stop_behind']:g} times the fastest at its shape")
    ended = "" if summary["converged"] else f", precision target not met (stopped by {summary['stopped_by']})"
    return ended + (", fewer than min_samples" if summary["thin_median"] else "")


HOST_KEPT = 200  # warm-up host times a row keeps: a short kernel's warm-up launches it tens of thousands of times


def _kept(host_s: list) -> list:
    """The warm-up's host times a row keeps: the first (its one-time costs) and the last HOST_KEPT - 1, where the
    clocks had settled; host_median_s and warmup_runs are of them all."""
    return host_s if len(host_s) <= HOST_KEPT else host_s[:1] + host_s[-(HOST_KEPT - 1):]


HOST_SAMPLES_FOR_AGREEMENT = 3  # warm-up launches (besides the first) a CPU point needs before its host time is read

HOST_DISAGREEMENT = 3.0  # on a CPU, device and host time of one call are one clock: this far apart, work moved


HOST_RECHECKS = 3  # pairs of calls timed again after sampling before a disagreement fails a point


def _host_disagrees(backend, run, device_median_s: float, host_fastest_s: float, sampled) -> str | None:
    """On a CPU, the timed region and a call timed from the host (its warm-up) measure the same thing; a device median
    far below the host's fastest call means the samples' work ran outside their timed region (it finished in the
    accounting between samples, which back-to-back calls do not leave it). But a host whose cores other jobs take
    (the run's compiles) slows a multithreaded kernel's calls several times over while they hold them, and the warm-up
    may meet that load where the samples did not. So before failing the point, HOST_RECHECKS pairs are timed now,
    each a call timed as a sample is (`sampled()`: its seconds) and, right after it under the same load, one from the
    host: work that runs outside the timed region leaves every host call of them far slower than the sampled call
    before it; an honest kernel leaves some pair alike, whatever the load."""
    if device_median_s * HOST_DISAGREEMENT >= host_fastest_s:
        return None
    pairs = [(sampled(), backend.host_time(run)) for _ in range(HOST_RECHECKS)]
    host_fastest_s = min(host_fastest_s, *(host for _, host in pairs))
    if device_median_s * HOST_DISAGREEMENT < host_fastest_s and all(
            sample * HOST_DISAGREEMENT < host for sample, host in pairs):
        return (f"the timed median ({device_median_s * 1e3:.3g} ms) is {host_fastest_s / device_median_s:.3g} times "
                f"below the host's fastest call ({host_fastest_s * 1e3:.3g} ms, in its warm-up and {HOST_RECHECKS} "
                f"calls after its samples, each more than {HOST_DISAGREEMENT:g} times slower than a call timed as a "
                f"sample just before it): on a CPU the two are one clock, so work ran outside the timed region")
    return None


def _as_sampled(backend, run, ledger: Ledger) -> float:
    """One call timed as a sample is, and accounted for alike (its time is not kept)."""
    ledger.before()
    seconds = backend.device_time(run)
    ledger.after()
    return seconds


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
        checked, why, _ = compare(reference(workload, backend, inputs), backend, out, None, mode, k)
        if checked != "ok":
            return f"the timed launches' output, {what}: {why}"
    outside = sum(backend.outside_writes(b) for b in ledger.buffers())
    if outside:
        return f"the timed launches wrote {outside} elements outside their outputs (the guard bands)"
    return None

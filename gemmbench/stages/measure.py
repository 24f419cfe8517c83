"""The measure stage: one worker validates every shape of a variant in one mode (fresh inputs, NaN-poisoned output,
fp64 reference) and times each sweep point right after its shape passed; each timed row is kept on disk as it
arrives, so a rerun times only what is missing."""
from __future__ import annotations

import logging
import time
from pathlib import Path

from gemmbench import logs, plan
from gemmbench.files import digest, read_json, write_json
from gemmbench.run.supervise import run_task
from gemmbench.run.task import Point, Task, not_timed
from gemmbench.stages.common import base_row, validation_shapes, variant_of

log = logging.getLogger("gemmbench")


def run(config: dict, key: str, mode: str, build_path, validation_out, bench_out=None
        ) -> tuple[list[dict], list[dict]]:
    """Validation rows and timing rows of one variant in one mode, from one worker (one import, one context, one
    compile per kernel). Every validation shape (the sweep's, the awkward ones, an off-tile shape per tuned size class)
    runs on fresh inputs with NaN-poisoned outputs against an fp64 reference; each sweep point is timed right after
    its shape passed, on the same reference. Without `bench_out`, validation only.

    Each timed row is kept in <bench_out without .json>/<shape>.json as soon as it is measured, with a key of what
    determines it (the build, the timing settings): a rerun (after a kill, say) reuses the ok rows whose key still
    matches where their shape passes validation again, and times only the rest (points that ended in error, timeout
    or oom are timed again)."""
    logs.job_started(key, mode)
    variant, built = variant_of(config, key), read_json(build_path)
    refused = built.get("prepare_refused") or {}
    checks = validation_shapes(config, variant, built.get("tuned"))
    sweep = plan.sweep_shapes(config, variant.workload) if bench_out else []
    points_dir = Path(bench_out).with_suffix("") if bench_out else None
    point_key = digest({"build": built, "timing": config["timing"], "cache": config["cache"],
                               "seed": config["seed"]})
    checked = [base_row(config, variant, mode, shape) for shape in checks]
    timed = [base_row(config, variant, mode, shape) for shape in sweep]
    check_of = {shape.dims: row for shape, row in zip(checks, checked)}  # a shape's validation row (filled in below)
    sweep_index = {shape.dims: i for i, shape in enumerate(sweep)}
    kept, history = {}, {}
    for shape in sweep:
        path = points_dir / f"{shape.label}.json"
        record = read_json(path) if path.exists() else None
        if record and record.get("key") == point_key and record["rows"][0]["status"] == "ok":
            kept[shape.label] = record
        history[shape.label] = past_failures(record)
    if kept:
        log.info("%s %s: %d of %d points kept from an earlier run (%s)", key, mode, len(kept), len(sweep), points_dir)

    def blocked(shape):
        skip = plan.skip_reason(config, variant, shape)
        if skip:
            return "skipped", skip
        if built["status"] != "ok":
            return "error", f"build failed: {built['message']}"
        if shape.label in refused:  # a refusal is the variant's answer for this shape: compiling again repeats it
            return "error", f"refused when its build compiled it ahead: {refused[shape.label]}"
        return None

    # The worker's points in order: each shape's validation, and a sweep shape's timing right after it.
    order, points, labels = [], [], []  # order[j]: the (rows, index) that point j of the task fills
    for i, shape in enumerate(checks):
        outcome = blocked(shape)
        if outcome:
            checked[i].update(zip(("status", "message"), outcome))
        else:
            order.append((checked, i))
            points.append(Point(shape.sizes, checked[i]["seed"], stage="validate"))
            labels.append(f"validate {shape.label}")
        b = sweep_index.get(shape.dims)
        if b is None:
            continue
        if outcome:
            timed[b].update(not_timed(checked[i]))
        elif shape.label not in kept:
            order.append((timed, b))
            points.append(Point(shape.sizes, timed[b]["seed"], stage="bench", checked_by=len(points) - 1))
            labels.append(f"bench {shape.label}")
    arrivals = [(time.perf_counter(), None)]  # (when, row): each row as it arrived

    def arrived(j, result, device):
        rows, i = order[j]
        rows[i].update(result, **({k: device[k] for k in ("gpu", "gpu_uuid", "host")} if device else {}))
        if rows is timed:
            _keep_timed(built, check_of[sweep[i].dims], sweep[i], timed[i], history[sweep[i].label], point_key,
                        points_dir, device)
        arrivals.append((time.perf_counter(), rows[i]))

    devices = []
    if points:
        task = Task.of("measure", config, variant, mode, points, built.get("tuned"))
        _, device = run_task(task, config["timing"]["point_timeout_s"], lambda j: f"{key} {mode} {labels[j]}",
                             arrived)
        devices = [device] if device else []
    _log_overhead(key, mode, arrivals)
    write_json(validation_out, {"rows": checked, "devices": devices})
    if not bench_out:
        return checked, []
    timed_devices = list(devices)
    for i, shape in enumerate(sweep):
        if shape.label not in kept:
            continue
        if check_of[shape.dims]["status"] == "ok":
            timed[i], timed_devices = kept[shape.label]["rows"][0], timed_devices + kept[shape.label]["devices"]
        else:
            timed[i].update(not_timed(check_of[shape.dims]))
    write_json(bench_out, {"rows": timed, "devices": list({d["gpu_uuid"]: d for d in timed_devices}.values())})
    return checked, timed


def _keep_timed(built, check, shape, row, history, point_key, points_dir, device) -> None:
    """A timed row as it arrives: its shape's validation errors (`check`: its validation row), past failures and
    comparison with its tuning added, and kept on disk before the next point runs."""
    row.update({k: check.get(k) for k in ("rel_error", "max_abs_error")})
    row.update(failure_columns(history))
    row.update(against_tuning(built, shape, row), tuning=built.get("tuning", ""))
    write_json(points_dir / f"{shape.label}.json",
               {"key": point_key, "rows": [row], "devices": [device] if device else [], "history": history})


TUNING_SLACK = 1.15  # a point this much slower than its tuning measured the same kernel and shape is flagged


def against_tuning(built: dict, shape: plan.Shape, row: dict) -> dict:
    """slower_than_tuning: the point's median over the one its tuning measured on the same kernel at this shape (a
    size class's own square shape), on the same GPU model, where that is over TUNING_SLACK; the message says so. A
    kernel that runs slower in this run than when it was tuned (another GPU state, another process's work, or a fault
    of the run) shows here instead of passing as its speed."""
    sizes = set(shape.sizes.values())
    tuned = (built.get("tuned_median_s") or {}).get(str(sizes.pop())) if len(sizes) == 1 else None
    if row.get("status") != "ok" or not tuned or built.get("tuned_on") != plan.gpu_slug(row.get("gpu") or ""):
        return {}
    ratio = row["median_s"] / tuned
    if ratio <= TUNING_SLACK:
        return {"slower_than_tuning": None}
    return {"slower_than_tuning": ratio,
            "message": f"{row['message']}; {ratio:.2f}x the time its tuning measured for this kernel and shape on "
                       f"{built['tuned_on']}"}


FAILED = ("failed", "error", "timeout", "oom")  # a point measured that did not pass: kept in its history


def past_failures(record: dict | None) -> list[dict]:
    """The failures of a point kept in its file: those it carried, and its own row if that did not pass. A point
    measured again after a failure (a rerun, --forcerun, a resume) keeps them, so a later `ok` says it failed before."""
    if not record:
        return []
    row = record["rows"][0]
    own = [{"status": row["status"], "message": row.get("message", ""), "gpu_uuid": row.get("gpu_uuid"),
            "source_digest": row.get("source_digest")}] if row.get("status") in FAILED else []
    return list(record.get("history", [])) + own


def failure_columns(history: list[dict]) -> dict:
    return {"failures_before": len(history),
            "failure_history": " | ".join(f"{h['status']}: {h['message']}"[:300] for h in history)}


def _log_overhead(key: str, mode: str, arrivals: list[tuple]) -> None:
    """Where a job's time went: validation and timing (warm-up, sampling and the checks of what was timed, as the
    rows report them), and the rest: the worker's start, imports and compiles, and what passes between rows."""
    if len(arrivals) < 2:
        return
    wall = arrivals[-1][0] - arrivals[0][0]
    validating = sum(row.get("validate_s") or 0.0 for _, row in arrivals[1:])
    timing = sum(row.get("measure_s") or 0.0 for _, row in arrivals[1:])
    first = arrivals[1][0] - arrivals[0][0] - (arrivals[1][1].get("validate_s") or arrivals[1][1].get("measure_s")
                                               or 0.0)
    log.info("%s %s: %d rows in %.1f s: validation %.1f s, timing %.1f s, the rest %.1f s (of which before the "
             "first row, the worker's start, imports and compiles: %.1f s)", key, mode, len(arrivals) - 1, wall,
             validating, timing, wall - validating - timing, first)

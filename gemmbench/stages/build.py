"""The build stage: a variant compiled in one mode, once per tuned size class (its kernels land in the run's shared
caches, which every later job loads), with the facts of what was built (registers, shared memory, spills); a
variant specialised per shape compiles every planned shape ahead, off the GPU's critical path."""
from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
import tempfile
from pathlib import Path

from gemmbench import ROOT, plan, workloads
from gemmbench.files import read_json, write_json
from gemmbench.measure import provenance
from gemmbench.run.supervise import artifact_caches, compile_ahead, run_task
from gemmbench.run.task import Point, Task
from gemmbench.stages.common import validation_shapes, variant_of

log = logging.getLogger("gemmbench")


def run(config: dict, key: str, mode: str, out, tuning_path=None) -> dict:
    """The build row of `key` in `mode`, written to `out` (its tuned parameters: the record at `tuning_path`)."""
    variant = variant_of(config, key)
    record = read_json(tuning_path) if tuning_path else {}
    tuned = record.get("classes", {})
    classes = {size: c["params"] for size, c in tuned.items()} or None  # None: the configured parameters
    # what the tuning measured each class's kernel at (its size, on its GPU model): a bench point that is much slower
    # on the same kernel and shape is flagged (slower_than_tuning)
    measured = {size: c["median_s"] for size, c in tuned.items() if c.get("median_s")}
    # A variant specialised per shape compiles every shape validation and bench will run, here and off the GPU lock.
    prepare = [shape.sizes for shape in validation_shapes(config, variant, classes)
               if not plan.skip_reason(config, variant, shape)]
    refused = {}
    if variant.prepare:  # in parallel first (one kernel per shape; a tuned MetaSchedule one takes NVRTC seconds)
        _, rows = compile_ahead(config, variant, mode, [Point(sizes, 0) for sizes in prepare], classes)
        label = workloads.get(variant.workload).label
        refused = {label(sizes): row["message"] for sizes, row in zip(prepare, rows)
                   if row and row["status"] == "rejected"}  # the build does not compile these again
        prepare = [sizes for sizes in prepare if label(sizes) not in refused]
    task = Task.of("build", config, variant, mode, [Point({}, 0)], classes, prepare if variant.prepare else [],
                   refused)
    row = _as_tuned(task, run_task(task, config["timing"]["point_timeout_s"], lambda i: f"build {key} {mode}")[0][0],
                    record, config["timing"]["point_timeout_s"])
    row = {"family": variant.family, "variant": variant.name, "mode": mode, "description": variant.description,
           "params": plan.params(config, variant), "tuned": classes, **row, **provenance.source(str(ROOT)),
           "tuning": _tuning_source(record),
           **({"tuned_median_s": measured, "tuned_on": record.get("gpu")} if measured else {})}
    write_json(out, row)
    return row


REBUILDS = 2  # compiles again, each into a fresh cache, of a build whose tuned kernel came out unlike the one timed


def _tuned_registers(record: dict) -> dict:
    """Per size class, the registers of the kernel its tuning timed (the winning trial's), where the record has them."""
    timed = {(t["size"], json.dumps(t["params"], sort_keys=True)): t.get("registers")
             for t in record.get("trials", []) if "size" in t}
    found = {size: timed.get((int(size), json.dumps(c["params"], sort_keys=True)))
             for size, c in record.get("classes", {}).items()}
    return {size: registers for size, registers in found.items() if registers is not None}


def _unlike(row: dict, tuned: dict) -> dict:
    """The classes whose built kernel has other registers than its tuning's: {size: (built, tuned)}."""
    built = row.get("classes") or {}
    return {size: (built[size].get("registers"), registers) for size, registers in tuned.items()
            if built.get(size, {}).get("registers") not in (None, registers)}


def _as_tuned(task: Task, row: dict, record: dict, timeout_s: float) -> dict:
    """The build row, its kernels the ones its tuning timed: a compiler whose output varies from run to run (NVRTC
    13.5 now and then allocates another set of registers; kernels/machine_code.py) can cache an odd kernel, which every
    later job would load and time. Where a tuned class's kernel has other registers than the winning trial's, the
    build compiles again into a fresh cache (up to REBUILDS times), and the first that matches replaces the odd
    kernels in the run's caches; where none does, the row says so and the kernels stay as compiled."""
    tuned = _tuned_registers(record)
    unlike = _unlike(row, tuned) if row.get("status") == "ok" else {}
    for attempt in range(REBUILDS):
        if not unlike:
            break
        log.warning("%s %s: the compiler made kernels unlike the ones its tuning timed (registers per class, built "
                    "vs tuned: %s); compiling again into a fresh cache (%d of %d)", task.variant, task.mode, unlike,
                    attempt + 1, REBUILDS)
        with tempfile.TemporaryDirectory(prefix="rebuild-", dir=task.cache_dir) as fresh:
            again = run_task(dataclasses.replace(task, cache_dir=fresh), timeout_s,
                             lambda i: f"build {task.variant} {task.mode} again")[0][0]
            if again.get("status") == "ok" and not _unlike(again, tuned):
                for cache in artifact_caches(fresh).values():  # the matching kernels replace the odd ones
                    _replace_differing(Path(cache), Path(task.cache_dir) / Path(cache).name)
                log.info("%s %s: compiled again, its kernels match its tuning's", task.variant, task.mode)
                return {**again, "message": f"{again['message']}; compiled again: the first compile's kernels had "
                                            f"other registers than its tuning's ({unlike})"}
    if unlike:
        row = {**row, "message": f"{row['message']}; registers per class, built vs tuned: {unlike} (the compiler's "
                                 f"output varies; {REBUILDS} more compiles made none like the tuning's)"}
    return row


def _replace_differing(source: Path, target: Path) -> None:
    """Each file under `source` that `target` lacks or holds otherwise, written there atomically (a job loading a
    kernel from the cache meanwhile reads the old file or the new one, never a part)."""
    for path in (p for p in source.rglob("*") if p.is_file()) if source.is_dir() else ():
        there = target / path.relative_to(source)
        if not there.exists() or there.read_bytes() != path.read_bytes():
            there.parent.mkdir(parents=True, exist_ok=True)
            partial = there.with_name(f".{there.name}.{os.getpid()}")
            shutil.copyfile(path, partial)
            os.replace(partial, there)


def _tuning_source(record: dict) -> str:
    """Where a build's parameters come from, for its rows: none (the configured ones), a search on this GPU, a
    committed result, or one transferred (another GPU model or toolchain), and why."""
    if not record:
        return ""
    if record.get("transferred"):
        return f"transferred from {record['reused_from']}: {record['transferred']}"
    return f"committed {record['reused_from']}" if record.get("reused_from") else "searched on this GPU"

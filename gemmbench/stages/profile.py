"""The profile stage: Nsight Compute's counters of one launch per profiled sweep shape (measure/ncu.py reads
them), on the kernels the build compiled."""
from __future__ import annotations

import dataclasses
import logging
import shutil
import time
from pathlib import Path

from gemmbench import plan
from gemmbench.files import read_json, write_json
from gemmbench.measure import ncu
from gemmbench.run.supervise import run_task
from gemmbench.run.task import Point, Task
from gemmbench.stages.common import base_row, variant_of

log = logging.getLogger("gemmbench")


def run(config: dict, key: str, mode: str, build_path, out) -> list[dict]:
    """Nsight Compute's counters (measure/ncu.py) of one launch of the variant at each profiled sweep shape, on the
    kernels its build compiled, fresh inputs and the bench's stream: one row per kernel the launch ran, or one row
    per shape that says why it has none (ncu missing or not permitted, a shape the variant does not run, a failure).
    The profiler's raw CSV is kept beside `out`, one file per shape."""
    variant, built = variant_of(config, key), read_json(build_path)
    profiled = [(shape, next(iter(shape.sizes.values()))) for shape in plan.sweep_shapes(config, variant.workload)]
    profiler = shutil.which(config["profile"]["ncu"])
    raw_dir = Path(out).with_suffix("")
    raw_dir.mkdir(parents=True, exist_ok=True)
    rows = []
    for shape, size in ((s, size) for s, size in profiled if size in config["profile"]["profiled_sizes"]):
        base = {**base_row(config, variant, mode, shape), "size": size}
        why = (f"not built: {built.get('message', '')}"[:300] if built.get("status") != "ok"
               else plan.skip_reason(config, variant, shape)
               or (None if profiler else f"Nsight Compute not found: no {config['profile']['ncu']!r} on PATH "
                                         "(config profile.ncu)"))
        if why:
            rows.append({**base, "status": "skipped", "message": why})
            continue
        raw = raw_dir / f"{shape.label}.csv"
        task = dataclasses.replace(Task.of("profile", config, variant, mode, [Point(shape.sizes, base["seed"])],
                                            built.get("tuned")), wrap=ncu.command(profiler, str(raw)))
        start = time.perf_counter()
        done, device = run_task(task, config["timing"]["point_timeout_s"],
                                lambda i: f"profile {key} {mode} {shape.label}")
        ran, base = done[0], {**base, **({k: device[k] for k in ("gpu", "gpu_uuid", "host")} if device else {})}
        text = raw.read_text(errors="replace") if raw.exists() else ""
        kernels = ncu.parse(text) if ran["status"] == "ok" else []
        if not kernels:
            restricted = ncu.RESTRICTED in text
            status = "skipped" if restricted else ("error" if ran["status"] == "ok" else ran["status"])
            message = ("the GPU's performance counters are not permitted to this user (ncu: ERR_NVGPUCTRPERM)"
                       if restricted else ran["message"] if ran["status"] != "ok" else "ncu profiled no kernel")
            rows.append({**base, "status": status, "message": message})
            continue
        log.info("%s %s %s: %d kernel(s) profiled in %.1f s", key, mode, shape.label, len(kernels),
                 time.perf_counter() - start)
        rows += [{**base, "status": "ok", "message": "", "params": ran.get("params"), **kernel} for kernel in kernels]
    write_json(out, {"rows": rows})
    return rows

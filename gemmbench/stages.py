"""The pipeline's stages as plain functions: the Snakemake scripts and the CLI call these.

Each stage writes one JSON file whose rows cover every planned point, whatever happened to it.
"""
from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from unittest import mock

from gemmbench import backend as backends
from gemmbench import gpus, plan, tune as tuning, workloads
from gemmbench.supervise import run_task
from kernels import registry

log = logging.getLogger("gemmbench")


def read_json(path) -> dict:
    return json.loads(Path(path).read_text())


def write_json(path, data) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, default=str))
    tmp.replace(path)


def _variant(config: dict, key: str) -> registry.Variant:
    return registry.load(config["variant_modules"])[key]


def _task(kind: str, config: dict, variant: registry.Variant, mode: str, cache_dir, points: list[dict],
          classes: dict | None = None) -> dict:
    return {"kind": kind, "variant": variant.key, "variant_modules": config["variant_modules"],
            "device": variant.device, "mode": mode, "params": plan.params(config, variant), "classes": classes,
            "cache_dir": str(cache_dir), "points": points, "tolerance": config["tolerance"][mode],
            "timing": {**config["timing"], **config["tune"]["timing"]} if kind == "tune" else config["timing"],
            "cache": config["cache"]}


def _base_row(config, variant, mode, shape: plan.Shape) -> dict:
    # gpu, gpu_uuid and host name the device the point ran on (set once a worker reports it; none if it never ran)
    return {"gpu": None, "gpu_uuid": None, "host": None, "device": variant.device, "workload": variant.workload,
            "family": variant.family, "variant": variant.name, "mode": mode,
            **shape.sizes, "shape_kind": shape.kind, "cache": config["cache"],
            "seed": backends.seed_for(config["seed"], *shape.sizes.values())}


def tune(config: dict, key: str, mode: str, gpu: str, cache_dir, out) -> dict:
    """The fastest validated parameters per size class on this GPU: a committed result for this GPU is reused
    when the kernel sources, search space and settings are unchanged; otherwise the space is searched."""
    variant = _variant(config, key)
    settings = tuning.settings(config["tune"], variant)
    expected = tuning.key(variant, mode, settings)
    committed = tuning.committed_path(gpu, variant, mode)
    record = tuning.reusable(committed, expected)
    if record:
        reused_from = str(committed.relative_to(tuning.COMMITTED.parent.parent))
        log.info("%s %s: reusing the committed tuning result %s", key, mode, reused_from)
        write_json(out, {**record, "reused_from": reused_from})
        return record
    if variant.tuner:
        record = _autotune(variant, mode, gpu, settings, expected, committed, out)
        write_json(out, record)
        return record
    Path(cache_dir).mkdir(parents=True, exist_ok=True)
    candidates = tuning.candidates(variant, plan.params(config, variant), settings["trials"], settings["seed"])
    points = [{"m": n, "n": n, "k": n, "size": n, "params": params, "seed": backends.seed_for(config["seed"], n, n, n)}
              for n in settings["sizes"] for params in candidates]
    log.info("%s %s: searching %d candidates at sizes %s on %s (%d trials)", key, mode, len(candidates),
             settings["sizes"], gpu, len(points))

    def describe(i):
        changed = {k: v for k, v in points[i]["params"].items() if v != candidates[0].get(k)}
        return f"tune {key} n={points[i]['size']} {changed or 'defaults'}"

    task = _task("tune", config, variant, mode, cache_dir, points)
    rows, _ = run_task(task, config["timing"]["point_timeout_s"], describe)
    trials = [{"size": p["size"], "params": p["params"], **{k: r.get(k) for k in (
        "status", "message", "median_s", "tflops", "rel_error", "registers", "compile_s", "throttled")}}
              for p, r in zip(points, rows)]
    classes = tuning.best_per_class(trials, settings["sizes"])
    for size in settings["sizes"]:
        if str(size) not in classes:
            log.warning("%s %s: no candidate passed at n=%d; that class keeps the default parameters", key, mode, size)
    record = {"gpu": gpu, "variant": key, "mode": mode, "key": expected, "settings": settings, "space": variant.space,
              "classes": classes, "trials": trials}
    write_json(out, record)
    return record


def _autotune(variant, mode: str, gpu: str, settings: dict, expected: str, committed: Path, out) -> dict:
    """A variant's own search per size class, each with its database under <out without .json>/<size>/, which a
    rerun resumes; an earlier committed result (other settings) seeds an empty database."""
    previous = read_json(committed)["classes"] if committed.exists() else {}
    classes = {}
    with gpus.pinned(variant.device) as env, mock.patch.dict(os.environ, env):  # the search's workers inherit it
        for size in settings["sizes"]:
            start = time.perf_counter()
            try:
                found = variant.tuner(mode, (size, size, size), settings["trials"], Path(out).with_suffix("") / str(size),
                                      previous.get(str(size)), settings["seed"], log)
            except Exception as exc:  # the class keeps no result; the others still tune
                log.warning("%s %s: tuning n=%d failed (%s: %s); that class is left out", variant.key, mode, size,
                            type(exc).__name__, exc)
                continue
            classes[str(size)] = {**found, "tune_s": round(time.perf_counter() - start, 1)}
            log.info("%s %s n=%d: best of %d trials %.3f ms (%.1f TFLOP/s) after %.0f s this sitting", variant.key, mode,
                     size, found["trials"], found["median_s"] * 1e3, found["tflops"], classes[str(size)]["tune_s"])
    return {"gpu": gpu, "variant": variant.key, "mode": mode, "key": expected, "settings": settings, "classes": classes}


def build(config: dict, key: str, mode: str, cache_dir, out, tuning_path=None) -> dict:
    variant = _variant(config, key)
    Path(cache_dir).mkdir(parents=True, exist_ok=True)
    tuned = read_json(tuning_path)["classes"] if tuning_path else {}
    classes = {size: c["params"] for size, c in tuned.items()} or None  # None: the configured parameters
    task = _task("build", config, variant, mode, cache_dir, [{}], classes)
    row = run_task(task, config["timing"]["point_timeout_s"], lambda i: f"build {key} {mode}")[0][0]
    row = {"family": variant.family, "variant": variant.name, "mode": mode,
           "params": json.dumps(plan.params(config, variant)), "tuned": json.dumps(classes) if classes else "", **row}
    write_json(out, row)
    return row


def _classes(built: dict) -> dict | None:
    """The tuned parameters per size class a build was made with (None: the configured parameters)."""
    return json.loads(built["tuned"]) if built.get("tuned") else None


def _run_points(kind, config, variant, mode, cache_dir, shapes, blocked, classes) -> tuple[list[dict], list[dict]]:
    """Rows for `shapes`, and the facts of the device they ran on (none if no point ran). A point the plan skips
    (size cap, shape the variant declares unsupported) or that `blocked(shape)` stops with a (status, message)
    gets that row; the others run in a supervised worker."""
    rows, todo, labels, devices = [], [], [], []
    for shape in shapes:
        row = _base_row(config, variant, mode, shape)
        skip = plan.skip_reason(config, variant, shape)
        outcome = ("skipped", skip) if skip else blocked(shape)
        if outcome:
            row.update(zip(("status", "message"), outcome))
        else:
            todo.append(row)
            labels.append(shape.label)
        rows.append(row)
    if todo:
        task = _task(kind, config, variant, mode, cache_dir, todo, classes)
        describe = lambda i: f"{kind} {variant.key} {mode} {labels[i]}"  # noqa: E731
        results, device = run_task(task, config["timing"]["point_timeout_s"], describe)
        where = {k: device[k] for k in ("gpu", "gpu_uuid", "host")} if device else {}
        for row, result in zip(todo, results):
            row.update(result, **where)
        devices = [device] if device else []
    return rows, devices


def validate(config: dict, key: str, mode: str, build_path, cache_dir, out) -> list[dict]:
    """Every sweep size and awkward shape, on fresh inputs with NaN-poisoned outputs, vs an fp64 reference."""
    variant, built = _variant(config, key), read_json(build_path)

    def blocked(shape):
        if built["status"] != "ok":
            return "error", f"build failed: {built['message']}"
        return None

    rows, devices = _run_points("validate", config, variant, mode, cache_dir, plan.validation_shapes(config), blocked,
                                _classes(built))
    write_json(out, {"rows": rows, "devices": devices})
    return rows


def bench(config: dict, key: str, mode: str, shape_label: str, build_path, validation_path, cache_dir, out) -> dict:
    """One point, timed only if it passed validation at this shape."""
    variant, built = _variant(config, key), read_json(build_path)
    shape = plan.Shape.parse(shape_label, variant.workload)
    check = next((r for r in read_json(validation_path)["rows"] if all(r.get(a) == v for a, v in shape.dims)), None)

    def blocked(shape):
        if check is None:
            return "skipped", "not benchmarked: this shape was not validated"
        if check["status"] != "ok":
            return "skipped", f"not benchmarked: validation {check['status']}: {check['message']}"
        return None

    rows, devices = _run_points("bench", config, variant, mode, cache_dir, [shape], blocked, _classes(built))
    row = rows[0]
    if check:
        row.update({k: check.get(k) for k in ("rel_error", "max_abs_error")})
    write_json(out, {"rows": [row], "devices": devices})
    return row


def _tables(tables_dir) -> dict:
    import pandas as pd

    tables_dir = Path(tables_dir)
    frames = {name: pd.read_parquet(tables_dir / f"{name}.parquet") for name in ("summary", "validation", "builds")}
    return {**frames, "devices": read_json(tables_dir / "devices.json")}


def plot(config: dict, tables_dir, figures_dir) -> dict:
    from gemmbench.plots import plot_all

    t = _tables(tables_dir)
    return plot_all(t["summary"], t["validation"], t["devices"], Path(figures_dir),
                    workloads.get(config["workload"]).figures)


def methodology(config: dict) -> dict:
    timing = config["timing"]
    return {
        "FLOPs": f"{workloads.get(config['workload']).formula} (float32 storage in every mode)",
        "Device time": "CUDA events around one launch queued behind a spinning kernel (as nvbench does), "
                       "so the host's launch overhead is excluded; CPU variants: wall time per call",
        "Host time": "wall time of one call including launch and synchronisation, recorded beside it",
        "Sampling": f"at least {timing['warmup_runs']} warm-up launches and {timing['warmup_s']} s of warm-up "
                    f"(clocks settle under load), then samples until the 95% confidence half-width "
                    f"of the median is below {timing['rel_precision']:.2%} of it (at least {timing['min_samples']} samples "
                    f"adding up to {timing['min_time_s']} s, "
                    f"at most {timing['max_samples']} samples, {timing['budget_s']} s budget per point)",
        "Cache": f"{config['cache']} (cold: L2 flushed by a 2×L2 memset before every sample, outside the timed region)",
        "Clocks": "NVML SM clock, temperature, power and slowdown reasons read after warm-up and after sampling; "
                  "a point with power/thermal slowdown or a clock drop over 5% is flagged as throttled",
        "Peak": "SM count × max SM clock × FLOP per clock per SM for the mode (FP32 FFMA, or dense TF32 tensor cores)",
        "% of cuBLAS": "cuBLAS median time / variant median time, same run, GPU model, shape and mode "
                       "(CPU variants: the cuBLAS of their host; b2b: two cuBLAS calls, cublas/b2b_unfused)",
        "Validation": f"fresh inputs uniform in [-1, 1) from seed ({config['seed']}, shape); output poisoned with NaN; "
                      f"fp64 reference (on the GPU for GPU variants); pass if every output is written, "
                      f"‖C−R‖/‖R‖ ≤ tolerance {config['tolerance']} and max |C−R| ≤ 10 × tolerance × max |R|",
        "Watchdog": f"each point runs in a supervised worker process, killed after {timing['point_timeout_s']} s",
    }


def report(config: dict, tables_dir, figures_dir, out) -> None:
    from gemmbench.report import render_report

    t = _tables(tables_dir)
    pngs = {name: Path(figures_dir) / f"{name}.png" for name in workloads.get(config["workload"]).figures}
    figures = {name: png for name, png in pngs.items() if png.exists()}
    render_report(summary=t["summary"], validation=t["validation"], builds=t["builds"],
                  samples_csv=Path(tables_dir) / "samples.csv", summary_csv=Path(tables_dir) / "summary.csv",
                  devices=t["devices"], figures=figures, out_html=Path(out), methodology=methodology(config))

"""The pipeline's stages as plain functions: the Snakemake scripts and the CLI call these.

Each stage writes one JSON file whose rows cover every planned point, whatever happened to it.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from gemmbench import ROOT, logs, plan, workloads
from gemmbench import tune as tuning
from gemmbench.files import read_json, write_json
from gemmbench.measure import backend as backends
from gemmbench.measure import provenance
from gemmbench.run import gpus
from gemmbench.run.supervise import artifact_caches, run_task
from gemmbench.run.task import Point, Task, not_timed
from kernels import registry

log = logging.getLogger("gemmbench")


# The config sections each stage reads; "sweep" and "listed" stand for those its workload's sweep and awkward
# shapes read (Workload.config_keys). A stage's rule passes exactly these, narrowed to its job's variant and mode
# (config_for), as the params the stage runs on: a change to one of them re-runs the stage's jobs, a change to any
# other section does not.
_RUNS = ("variant_modules", "params", "timing", "cache", "cache_dir")
READS = {
    "tune": (*_RUNS, "tune", "seed"),
    "build": (*_RUNS, "max_size", "sweep", "listed"),
    "measure": (*_RUNS, "max_size", "seed", "sweep", "listed"),
    "profile": (*_RUNS, "max_size", "seed", "sweep", "profile"),
}


def config_for(config: dict, stage: str, key: str, mode: str) -> dict:
    """What `stage` reads of the validated `config` for variant `key` in `mode` (READS): the params and max_size
    entries of that variant (or its family)."""
    shapes = workloads.get(_variant(config, key).workload).config_keys
    sections = dict.fromkeys(s for name in READS[stage] for s in shapes.get(name, (name,)))
    family = key.split("/")[0]
    narrowed = {"params": {k: v for k, v in config["params"].items() if k == key},
                "max_size": {k: v for k, v in config["max_size"].items() if k in (key, family)}}
    return {section: narrowed.get(section, config[section]) for section in sections}


def _variant(config: dict, key: str) -> registry.Variant:
    return registry.load(config["variant_modules"])[key]


def _task(kind: str, config: dict, variant: registry.Variant, mode: str, points: list[Point],
          classes: dict | None = None, prepare: list[dict] = (), refused: dict | None = None) -> Task:
    return Task(kind=kind, variant=variant.key, variant_modules=list(config["variant_modules"]), device=variant.device,
                mode=mode, params=plan.params(config, variant), classes=classes, cache_dir=str(cache_dir(config)),
                points=points,
                timing={**config["timing"], **config["tune"]["timing"]} if kind == "tune" else config["timing"],
                cache=config["cache"], prepare=list(prepare), refused=dict(refused or {}))


def cache_dir(config: dict) -> Path:
    """Compiled kernels and device facts, shared by every job and process (results/cache unless configured)."""
    return Path(config["cache_dir"]).resolve()


def _base_row(config, variant, mode, shape: plan.Shape) -> dict:
    # gpu, gpu_uuid and host name the device the point ran on (set once a worker reports it; none if it never ran);
    # git_commit and git_dirty the tree that ran it
    return {"gpu": None, "gpu_uuid": None, "host": None, "device": variant.device, "workload": variant.workload,
            "family": variant.family, "variant": variant.name, "role": variant.role, "mode": mode,
            **shape.sizes, "shape_kind": shape.kind, "cache": config["cache"],
            "seed": backends.seed_for(config["seed"], *shape.sizes.values()), **provenance.source(str(ROOT)),
            "source_digest": provenance.digest(str(ROOT), tuple(tuning.determining_files(variant)))}


CLASS_OFFSETS = (-1, 1, -3, 3)  # an off-tile shape near a size class: its sizes plus these, axis by axis


def _validation_shapes(config: dict, variant: registry.Variant, classes: dict | None) -> list[plan.Shape]:
    """The plan's validation shapes and, for a variant tuned per size class, one off-tile shape per class: the
    square sweep sizes are whole tiles of every class's kernel, and each class's kernel is the one timed there."""
    shapes = plan.validation_shapes(config, variant.workload)
    known = {shape.dims for shape in shapes}
    axes = workloads.get(variant.workload).axes
    for size in sorted(int(size) for size in classes or {} if size):
        shape = plan.Shape.of(variant.workload, [size + d for d in CLASS_OFFSETS[:len(axes)]], "awkward")
        if shape.dims not in known:
            shapes.append(shape)
    return shapes


def tune(config: dict, key: str, mode: str, gpu: str, out) -> dict:
    """The fastest validated parameters per size class on this GPU: a committed result for this GPU is reused
    when the kernel sources, search space and settings are unchanged; otherwise the space is searched."""
    variant = _variant(config, key)
    settings = tuning.settings(config["tune"], variant)
    expected = tuning.key(variant, mode, settings)
    committed, record = tuning.committed(config["tune"], variant, mode, gpu)
    if record:
        reused_from = str(committed.relative_to(tuning.COMMITTED.parent.parent))
        log.info("%s %s: reusing the committed tuning result %s", key, mode, reused_from)
        # a search of its own, without a budget to search again
        if tuning.relevant(variant, record.get("compilers", {})) != tuning.compilers(variant):
            log.warning("%s %s: %s was tuned with %s; this host compiles with %s", key, mode, reused_from,
                        record.get("compilers"), tuning.compilers(variant))
        write_json(out, {**record, "reused_from": reused_from})
        return record
    facts = tuning.host_gpu()
    found = tuning.transferred(config["tune"], variant, mode, gpu, facts) if config["tune"]["transfer"] else None
    if found:
        path, record, why = found
        source = str(path.relative_to(tuning.COMMITTED.parent.parent))
        log.warning("%s %s: no committed tuning result for this GPU and toolchain; using %s, transferred: %s "
                    "(tune.transfer=false searches instead)", key, mode, source, why)
        write_json(out, {**record, "reused_from": source, "transferred": why})
        return record
    if facts:  # what another GPU model's run needs to know to take these records (tune.transferred)
        write_json(Path(out).parents[2] / tuning.GPU_FACTS, facts)
    if variant.tuner:
        record = _autotune(config, variant, mode, gpu, settings, expected, committed, out)
        write_json(out, record)
        return record
    candidates = tuning.candidates(variant, plan.params(config, variant), settings["trials"], settings["seed"])
    points = [_trial(config, variant, size, params) for size in settings["sizes"] for params in candidates]
    earlier = tuning.earlier_trials(config["tune"], variant, mode, gpu)
    todo = [p for p in points if tuning.trial_id(p.size_class, p.params) not in earlier]
    log.info("%s %s: searching %d candidates at sizes %s on %s (%d trials, %d of them kept from %s)", key, mode,
             len(candidates), settings["sizes"], gpu, len(points), len(points) - len(todo),
             committed.relative_to(tuning.COMMITTED.parent.parent) if len(todo) < len(points) else "no earlier search")

    def describe(i):
        changed = {k: v for k, v in todo[i].params.items() if v != candidates[0].get(k)}
        return f"tune {key} n={todo[i].size_class} {changed or 'defaults'}"

    rows = _measure_trials(config, variant, mode, todo, describe) if todo else []
    measured = {tuning.trial_id(p.size_class, p.params): {"size": p.size_class, "params": p.params,
                                                          **{k: r.get(k) for k in TRIAL_FIELDS}}
                for p, r in zip(todo, rows)}
    found = {**earlier, **measured}
    trials = [found[tuning.trial_id(p.size_class, p.params)] for p in points]
    classes = tuning.best_per_class(trials, settings["sizes"])
    for size in settings["sizes"]:
        if str(size) not in classes:
            log.warning("%s %s: no candidate passed at n=%d; that class keeps the default parameters", key, mode, size)
    record = {"gpu": gpu, "variant": key, "mode": mode, "key": expected, "settings": settings,
              "compilers": tuning.compilers(variant), "space": variant.space, "classes": classes,
              "generated": tuning.generated(variant, mode, classes), "trials": trials}
    write_json(out, record)
    return record


TRIAL_FIELDS = ("status", "message", "median_s", "tflops", "rel_error", "registers", "compile_s", "throttled")


def _trial(config: dict, variant: registry.Variant, size: int, params: dict) -> Point:
    """A tune trial: `params` timed at the square shape of class `size`."""
    sizes = dict.fromkeys(workloads.get(variant.workload).axes, size)
    return Point(sizes, backends.seed_for(config["seed"], *sizes.values()), params, size)


COMPILE_WORKERS = 16  # at most: compiling is CPU work (TVM's codegen, NVRTC, Numba), one process per core


def _compile_ahead(config: dict, variant: registry.Variant, mode: str, points: list[Point],
                   classes: dict | None = None) -> tuple[int, list[dict | None]]:
    """The points' kernels compiled into the shared caches by up to COMPILE_WORKERS parallel workers (they launch
    nothing), where there is more than one core and one point: the number of workers and each point's compile row
    (None where none ran). A compile that fails otherwise than by the variant's refusal (`rejected`) is seen again,
    and reported, by whoever runs the point."""
    workers = min(COMPILE_WORKERS, os.cpu_count() or 1, len(points))
    rows = [None] * len(points)
    if workers > 1:
        chunks = [list(range(len(points)))[i::workers] for i in range(workers)]
        with ThreadPoolExecutor(workers) as pool:
            done = pool.map(lambda chunk: run_task(_task("compile", config, variant, mode, [points[i] for i in chunk],
                                                         classes), config["timing"]["point_timeout_s"],
                                                   log_rows=False)[0], chunks)
            for chunk, chunk_rows in zip(chunks, done):
                for i, row in zip(chunk, chunk_rows):
                    rows[i] = row
    return workers, rows


def _measure_trials(config: dict, variant: registry.Variant, mode: str, points: list[Point], describe) -> list[dict]:
    """Rows of tune trials: the candidates compiled first by parallel workers that share the GPU (they launch
    nothing, as builds), then validated and timed one after another by one supervised worker, which loads what
    they compiled from the caches. Each trial has the tune timing's watchdog: one that hangs costs that trial."""
    start = time.perf_counter()
    workers, _ = _compile_ahead(config, variant, mode, points)
    compiled = time.perf_counter()
    task = _task("tune", config, variant, mode, points)
    rows = run_task(task, task.timing["point_timeout_s"], describe)[0]
    log.info("%s %s: %d trials compiled in %.1f s by %d workers, validated and timed in %.1f s", variant.key, mode,
             len(points), compiled - start, workers, time.perf_counter() - compiled)
    return rows


def _autotune(config: dict, variant, mode: str, gpu: str, settings: dict, expected: str, committed: Path,
              out) -> dict:
    """A variant's own search per size class, each with its database under <out without .json>/<size>/, which a
    rerun resumes; an earlier committed result (other settings) seeds an empty database. The search proposes
    candidates; they are compiled, validated and timed here, as the generic search's are (`measure`). Each class
    keeps the candidates and seconds of every sitting, updated after each round (a sitting cut short keeps them)."""
    previous = read_json(committed)["classes"] if committed.exists() else {}
    classes = {}
    with gpus.pinned(variant.device) as env, gpus.environment(env):  # the search's own workers inherit it
        for size in settings["sizes"]:
            sittings = Sittings(Path(out).with_suffix("") / str(size), previous.get(str(size)))

            def measure(param_sets: list[dict]) -> list[dict]:
                log.info("%s %s n=%d: round %d proposed %d candidates, %.1f s after the previous round's end",
                         variant.key, mode, size, sittings.rounds + 1, len(param_sets), sittings.since_round())
                points = [_trial(config, variant, size, params) for params in param_sets]
                rows = _measure_trials(config, variant, mode, points, lambda i: f"tune {variant.key} n={size} "
                                       f"round {sittings.rounds + 1} candidate {i}")
                sittings.round(len(rows))
                return rows

            shape = (size,) * len(workloads.get(variant.workload).axes)
            try:
                found = variant.tuner(mode, shape, settings["trials"], sittings.work_dir, previous.get(str(size)),
                                      settings["seed"], log, measure)
            except Exception as exc:  # the class keeps no result; the others still tune
                log.warning("%s %s: tuning n=%d failed (%s: %s); that class is left out", variant.key, mode, size,
                            type(exc).__name__, exc)
                continue
            classes[str(size)] = {**found, **sittings.summary()}
            log.info("%s %s n=%d: best of %d trials %.3f ms (%.1f TFLOP/s); %.0f s of tuning in %d sittings",
                     variant.key, mode, size, found["trials"], found["median_s"] * 1e3, found["tflops"],
                     classes[str(size)]["tune_s"], len(classes[str(size)]["sittings"]))
    return {"gpu": gpu, "variant": variant.key, "mode": mode, "key": expected, "settings": settings,
            "compilers": tuning.compilers(variant), "classes": classes}


class Sittings:
    """The sittings of one class's search (candidates measured, seconds), in work_dir/sittings.json, carried over
    from the committed result that seeded it; the current one is written after every round."""

    def __init__(self, work_dir: Path, committed: dict | None):
        self.work_dir, self.path = work_dir, work_dir / "sittings.json"
        self.past = read_json(self.path) if self.path.exists() else list((committed or {}).get("sittings", []))
        self.start, self.rounds, self.candidates = time.perf_counter(), 0, 0
        self.round_end = self.start

    def since_round(self) -> float:
        """Seconds since the last round ended (or the sitting began): the search's own time for the next round."""
        return time.perf_counter() - self.round_end

    def round(self, candidates: int) -> None:
        self.rounds, self.candidates = self.rounds + 1, self.candidates + candidates
        self.round_end = time.perf_counter()
        self.work_dir.mkdir(parents=True, exist_ok=True)
        write_json(self.path, self.all())

    def all(self) -> list[dict]:
        now = {"candidates": self.candidates, "seconds": round(time.perf_counter() - self.start, 1)}
        return self.past + ([now] if self.candidates else [])

    def summary(self) -> dict:
        sittings = self.all()
        return {"tune_s": round(sum(s["seconds"] for s in sittings), 1), "sittings": sittings}


def build(config: dict, key: str, mode: str, out, tuning_path=None) -> dict:
    variant = _variant(config, key)
    record = read_json(tuning_path) if tuning_path else {}
    tuned = record.get("classes", {})
    classes = {size: c["params"] for size, c in tuned.items()} or None  # None: the configured parameters
    # what the tuning measured each class's kernel at (its size, on its GPU model): a bench point that is much slower
    # on the same kernel and shape is flagged (slower_than_tuning)
    measured = {size: c["median_s"] for size, c in tuned.items() if c.get("median_s")}
    # A variant specialised per shape compiles every shape validation and bench will run, here and off the GPU lock.
    prepare = [shape.sizes for shape in _validation_shapes(config, variant, classes)
               if not plan.skip_reason(config, variant, shape)]
    refused = {}
    if variant.prepare:  # in parallel first (one kernel per shape; a tuned MetaSchedule one takes NVRTC seconds)
        _, rows = _compile_ahead(config, variant, mode, [Point(sizes, 0) for sizes in prepare], classes)
        label = workloads.get(variant.workload).label
        refused = {label(sizes): row["message"] for sizes, row in zip(prepare, rows)
                   if row and row["status"] == "rejected"}  # the build does not compile these again
        prepare = [sizes for sizes in prepare if label(sizes) not in refused]
    task = _task("build", config, variant, mode, [Point({}, 0)], classes, prepare if variant.prepare else [], refused)
    row = _as_tuned(task, run_task(task, config["timing"]["point_timeout_s"], lambda i: f"build {key} {mode}")[0][0],
                    record, config["timing"]["point_timeout_s"])
    row = {"family": variant.family, "variant": variant.name, "mode": mode,
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


def profile(config: dict, key: str, mode: str, build_path, out) -> list[dict]:
    """Nsight Compute's counters (measure/profile.py) of one launch of the variant at each profiled sweep shape, on the
    kernels its build compiled, fresh inputs and the bench's stream: one row per kernel the launch ran, or one row
    per shape that says why it has none (ncu missing or not permitted, a shape the variant does not run, a failure).
    The profiler's raw CSV is kept beside `out`, one file per shape."""
    from gemmbench.measure import profile as counters

    variant, built = _variant(config, key), read_json(build_path)
    profiled = [(shape, next(iter(shape.sizes.values()))) for shape in plan.sweep_shapes(config, variant.workload)]
    ncu = shutil.which(config["profile"]["ncu"])
    raw_dir = Path(out).with_suffix("")
    raw_dir.mkdir(parents=True, exist_ok=True)
    rows = []
    for shape, size in ((s, size) for s, size in profiled if size in config["profile"]["sizes"]):
        base = {**_base_row(config, variant, mode, shape), "size": size}
        why = (f"not built: {built.get('message', '')}"[:300] if built.get("status") != "ok"
               else plan.skip_reason(config, variant, shape)
               or (None if ncu else f"Nsight Compute not found: no {config['profile']['ncu']!r} on PATH "
                                    "(config profile.ncu)"))
        if why:
            rows.append({**base, "status": "skipped", "message": why})
            continue
        raw = raw_dir / f"{shape.label}.csv"
        task = dataclasses.replace(_task("profile", config, variant, mode, [Point(shape.sizes, base["seed"])],
                                         built.get("tuned")), wrap=counters.command(ncu, str(raw)))
        start = time.perf_counter()
        done, device = run_task(task, config["timing"]["point_timeout_s"],
                                lambda i: f"profile {key} {mode} {shape.label}")
        ran, base = done[0], {**base, **({k: device[k] for k in ("gpu", "gpu_uuid", "host")} if device else {})}
        text = raw.read_text(errors="replace") if raw.exists() else ""
        kernels = counters.parse(text) if ran["status"] == "ok" else []
        if not kernels:
            restricted = counters.RESTRICTED in text
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


def _tuning_source(record: dict) -> str:
    """Where a build's parameters come from, for its rows: none (the configured ones), a search on this GPU, a
    committed result, or one transferred (another GPU model or toolchain), and why."""
    if not record:
        return ""
    if record.get("transferred"):
        return f"transferred from {record['reused_from']}: {record['transferred']}"
    return f"committed {record['reused_from']}" if record.get("reused_from") else "searched on this GPU"


def measure(config: dict, key: str, mode: str, build_path, validation_out, bench_out=None
            ) -> tuple[list[dict], list[dict]]:
    """Validation rows and timing rows of one variant in one mode, from one worker (one import, one context, one
    compile per kernel). Every validation shape (the sweep's, the awkward ones, an off-tile shape per tuned size class)
    runs on fresh inputs with NaN-poisoned outputs against an fp64 reference; each sweep point is timed right after
    its shape passed, on the same reference. Without `bench_out`, validation only.

    Each timed row is kept in <bench_out without .json>/<shape>.json as soon as it is measured, with a key of what
    determines it (the build, the timing settings): a rerun (after a kill, say) reuses the ok rows whose key still
    matches where their shape passes validation again, and times only the rest (points that ended in error, timeout
    or oom are timed again)."""
    process_s = logs.process_age_s()
    if process_s is not None:
        log.info("%s %s: the job's process started %.2f s before the stage (interpreter, imports)", key, mode,
                 process_s)
    variant, built = _variant(config, key), read_json(build_path)
    refused = built.get("prepare_refused") or {}
    checks = _validation_shapes(config, variant, built.get("tuned"))
    sweep = plan.sweep_shapes(config, variant.workload) if bench_out else []
    points_dir = Path(bench_out).with_suffix("") if bench_out else None
    point_key = tuning.digest({"build": built, "timing": config["timing"], "cache": config["cache"],
                               "seed": config["seed"]})
    checked = [_base_row(config, variant, mode, shape) for shape in checks]
    timed = [_base_row(config, variant, mode, shape) for shape in sweep]
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
        task = _task("measure", config, variant, mode, points, built.get("tuned"))
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
    if row.get("status") != "ok" or not tuned or built.get("tuned_on") != tuning.gpu_slug(row.get("gpu") or ""):
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


def _tables(tables_dir) -> dict:
    import pandas as pd

    tables_dir = Path(tables_dir)
    frames = {name: pd.read_parquet(tables_dir / f"{name}.parquet") for name in ("summary", "validation", "builds")}
    profiled = tables_dir / "profile.parquet"  # written by the profile stage, where it ran
    return {**frames, "devices": read_json(tables_dir / "devices.json"),
            "profile": pd.read_parquet(profiled) if profiled.exists() else None}


def plot(tables_dir, pngs: list) -> dict:
    """The figures named by their PNG paths (the plot rule's outputs; SVGs beside them)."""
    from gemmbench.present.plots import plot_all

    t = _tables(tables_dir)
    return plot_all(t["summary"], t["validation"], t["devices"], Path(pngs[0]).parent, [Path(p).stem for p in pngs])


def report(config: dict, tables_dir, pngs: list, out) -> None:
    """The report, with the figures `pngs` (the plot rule's outputs) in their order."""
    from gemmbench.present import report as report_module
    from gemmbench.present import tables
    from gemmbench.present.report import render_report

    t = _tables(tables_dir)
    figures = {Path(png).stem: Path(png) for png in pngs}
    other = config["compare_with"]
    render_report(summary=t["summary"], validation=t["validation"], builds=t["builds"],
                  samples_csv=Path(tables_dir) / "samples.csv", summary_csv=Path(tables_dir) / "summary.csv",
                  devices=t["devices"], figures=figures, out_html=Path(out),
                  methodology=report_module.methodology(config, t["devices"]),
                  compared_with=(other, tables.read(other)) if other else None,
                  profile=t["profile"] if config["profile"]["enabled"] else None)

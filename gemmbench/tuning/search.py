"""The tune stage's search: candidate parameter sets, trials at each size class (at a class next to the one below it,
only that class's fastest), the fastest validated one per class (checked at every other sweep shape its class will
run, then audited), and which class serves a point. A variant with a search
of its own (MetaSchedule) proposes candidates; the harness compiles, validates and times them here as it does the
generic search's, so a search never times anything itself.
"""
from __future__ import annotations

import functools
import itertools
import json
import logging
import math
import random
import statistics
import time
from dataclasses import replace
from pathlib import Path

from gemmbench import plan, workloads
from gemmbench.files import read_json, write_json
from gemmbench.measure import devices, timing
from gemmbench.run import gpus
from gemmbench.run.rows import TRIAL_TIMES, TRIAL_VALIDATION_LAUNCHES, VALIDATION_LAUNCHES
from gemmbench.run.supervise import compile_ahead, run_task
from gemmbench.run.task import Point, Task, pick
from gemmbench.tuning import records
from kernels import registry

log = logging.getLogger("gemmbench")

# Trial outcomes that another sitting would repeat (a timeout or an error may have been the sitting's: timed again)
SETTLED = ("ok", "rejected", "failed")


def candidates(variant: registry.Variant, defaults: dict, trials: int, seed: int) -> list[dict]:
    """The defaults, then up to trials - 1 others drawn (seeded) from every valid point of the variant's space."""
    names = list(variant.space)
    valid = []
    for combo in itertools.product(*variant.space.values()):
        params = {**defaults, **dict(zip(names, combo))}
        if params != defaults and variant.check_params(params) is None:
            valid.append(params)
    random.Random(seed).shuffle(valid)
    return [dict(defaults), *valid[: max(0, trials - 1)]]


def earlier_trials(tune: dict, variant: registry.Variant, mode: str, gpu: str) -> dict:
    """The trials of a committed search that a deeper one (more trials, the same seed and sizes, sources and
    compilers) can keep instead of timing them again, by (size, parameters): a long search spread over sittings."""
    path = records.committed_path(gpu, variant, mode)
    if variant.tuner or not path.exists():
        return {}
    ran = json.loads(path.read_text())
    now = records.settings(tune, variant)
    if now["trials"] < ran["settings"]["trials"] or not records.alike(now, ran["settings"]) or \
            not records.stopped_no_sooner(ran["settings"], now) or \
            not records.reusable(path, records.key(variant, mode, ran["settings"])):
        return {}
    return {trial_id(t["size"], t["params"]): t for t in ran["trials"] if t["status"] in SETTLED}


def trial_id(size: int, params: dict) -> str:
    return json.dumps([size, params], sort_keys=True)


def ident(params: dict) -> str:
    return json.dumps(params, sort_keys=True)


def best_per_class(rows: list[dict], sizes: list[int]) -> dict:
    """The fastest validated candidate at each class size."""
    classes = {}
    for size in sizes:
        ok = [r for r in rows if r["size"] == size and r["status"] == "ok"]
        if ok:
            best = min(ok, key=lambda r: r["median_s"])
            classes[str(size)] = {"params": best["params"], "median_s": best["median_s"], "tflops": best["tflops"]}
    return classes


def planned_trials(config: dict, variant: registry.Variant, mode: str, gpu: str, settings: dict):
    """The generic search's candidates, its trials (each candidate at each size class), the trials of a committed
    search that this one extends (`earlier_trials`) and those left to time."""
    proposed = candidates(variant, plan.params(config, variant), settings["trials"], settings["seed"])
    points = [trial(config, variant, size, params) for size in settings["sizes"] for params in proposed]
    earlier = earlier_trials(config["tune"], variant, mode, gpu)
    return proposed, points, earlier, [p for p in points if trial_id(p.size_class, p.params) not in earlier]


def compile_trials(config: dict, variant: registry.Variant, mode: str, gpu: str, settings: dict) -> dict:
    """The trials left to time, compiled into the shared caches by parallel workers that launch nothing: the
    tune_compile job, which runs beside the GPU's jobs as builds do, so that the tune job holds the GPU only to
    validate and time."""
    todo = planned_trials(config, variant, mode, gpu, settings)[3]
    start = time.perf_counter()
    workers, rows = compile_ahead(config, variant, mode, todo)
    took = time.perf_counter() - start
    log.info("%s %s: %d trials compiled ahead in %.1f s by %d workers", variant.key, mode, len(todo), took, workers)
    return {"trials": len(todo), "workers": workers, "compile_s": round(took, 1),
            "refused": sum(1 for row in rows if row and row.get("status") == "rejected")}


def compile_checks(config: dict, variant: registry.Variant, mode: str, trials: list[dict], sizes: list[int]) -> dict:
    """The serving checks' kernels of a variant specialised per shape (Variant.prepare), compiled into the shared
    caches by parallel workers that launch nothing: the tune_check_compile job, between the job that timed the
    trials and the one that checks and audits the picks, beside the GPU's jobs. Which candidates contend at a
    class's served shapes is known only from the trials, and a TVM kernel takes tens of seconds to compile."""
    points = served_points(config, checked_where(config, variant, trials, best_per_class(trials, sizes)))
    start = time.perf_counter()
    workers = compile_ahead(config, variant, mode, points)[0]
    took = time.perf_counter() - start
    log.info("%s %s: %d serving checks' kernels compiled ahead in %.1f s by %d workers", variant.key, mode,
             len(points), took, workers)
    return {"checks": len(points), "workers": workers, "compile_s": round(took, 1)}


def time_trials(config: dict, variant: registry.Variant, mode: str, gpu: str, settings: dict, committed: Path,
                compiled: bool = False) -> list[dict]:
    """The generic search's trials: every candidate (`candidates`) timed at the square shape of each size class, or,
    at a class next to the one below it (`records.narrowed`), that class's tune.narrow_to fastest; the trials of a
    committed search that this one extends kept (`earlier_trials`). `compiled`: the tune_compile job compiled them."""
    key = variant.key
    proposed, points, earlier, todo = planned_trials(config, variant, mode, gpu, settings)
    narrow = records.narrowed(settings)
    log.info("%s %s: searching %d candidates at sizes %s on %s (%d trials at most, %d of them kept from %s%s)", key,
             mode, len(proposed), settings["sizes"], gpu, len(points), len(points) - len(todo),
             records.shown(committed) if len(todo) < len(points) else "no earlier search",
             "".join(f"; at {size}, the {settings['narrow_to']} fastest at {below}" for size, below in narrow.items()))
    found = dict(earlier)

    def measure(batch: list[Point]) -> None:
        def describe(i):
            changed = {k: v for k, v in batch[i].params.items() if v != proposed[0].get(k)}
            return f"tune {key} n={batch[i].size_class} {changed or 'defaults'}"

        rows = measure_trials(config, variant, mode, batch, describe, compiled,
                              settings.get("stop_behind", 0.0)) if batch else []
        found.update({trial_id(p.size_class, p.params): {"size": p.size_class, "params": p.params,
                                                          **{k: r.get(k) for k in TRIAL_FIELDS}}
                      for p, r in zip(batch, rows)})

    measure([p for p in todo if p.size_class not in narrow])
    for size, below in narrow.items():  # in ascending order: a narrowed class's fastest may narrow the next
        finalists = fastest([t for t in found.values() if t["size"] == below], settings["narrow_to"])
        measure([p for p in todo if p.size_class == size and ident(p.params) in finalists])
    return [found[i] for i in (trial_id(p.size_class, p.params) for p in points) if i in found]


def search(config: dict, variant: registry.Variant, mode: str, gpu: str, settings: dict, expected: str,
           committed: Path, compiled: bool = False, timed: list[dict] | None = None) -> dict:
    """The generic search: its trials (`time_trials`), and the record of each class's pick (`picks`), with every
    trial. `compiled`: the tune_compile job compiled the trials. `timed`: the trials, timed already by the
    tune_trials job of a variant specialised per shape, whose serving checks' kernels the tune_check_compile job then
    compiled (`compile_checks`)."""
    found = timed if timed is not None else time_trials(config, variant, mode, gpu, settings, committed, compiled)
    trials = [dict(t) for t in found]  # copies: a pick that fails its audit is marked failed
    classes, checks, audits = picks(config, variant, mode, trials, settings["sizes"], compiled,
                                    checks_compiled=compiled and (timed is not None or not variant.prepare))
    for size in settings["sizes"]:
        if str(size) not in classes:
            log.warning("%s %s: no candidate passed at n=%d; that class keeps the default parameters", variant.key,
                        mode, size)
    return {"gpu": gpu, "variant": variant.key, "mode": mode, "key": expected, "settings": settings,
            "compilers": records.compilers(variant), "space": variant.space, "classes": classes, "trials": trials,
            "checks": checks, "audits": audits}


def fastest(trials: list[dict], count: int) -> set[str]:
    """The parameters (`ident`) of the `count` fastest validated trials."""
    ok = sorted((t for t in trials if t["status"] == "ok"), key=lambda t: t["median_s"])
    return {ident(t["params"]) for t in ok[:count]}


def picks(config: dict, variant: registry.Variant, mode: str, trials: list[dict], sizes: list[int],
          compiled: bool = False, checks_compiled: bool = False) -> tuple[dict, list[dict], list[dict]]:
    """Each class's pick: its fastest validated trial, checked where the class serves (`check_served`), then
    audited as a measured point is (`audit`); a pick that fails its audit fails as a trial, and the classes are
    picked again without it. Returns the classes, the serving checks and the audits. Trials are timed without an
    audit: only a pick's timing is ever used. `compiled`: the trials were compiled ahead; `checks_compiled`: the
    checks' kernels too (a kernel specialised per shape needs its own for each check)."""
    audits: list[dict] = []
    while True:
        classes, checks = check_served(config, variant, mode, trials, best_per_class(trials, sizes),
                                       checks_compiled)
        passed = {(a["size"], ident(a["params"])) for a in audits if a["status"] == "ok"}
        todo = {int(size): c["params"] for size, c in classes.items() if (int(size), ident(c["params"])) not in passed}
        done = audit(config, variant, mode, todo, compiled)
        audits += done
        failed = [a for a in done if a["status"] != "ok"]
        if not failed:
            return classes, checks, audits
        for row in failed:
            lost = next(t for t in trials if t["size"] == row["size"] and t["params"] == row["params"])
            lost.update(status="failed", message=f"failed its audit as class {row['size']}'s pick: {row['message']}")


def audit(config: dict, variant: registry.Variant, mode: str, picked: dict[int, dict],
          compiled: bool = False) -> list[dict]:
    """The picked parameters of each class (`picked`: size -> parameters) validated and timed again at its square
    shape, with the audit a measured point has: a fault that fires once in a few dozen launches may pass a trial's
    few samples. Rows as trials' are."""
    points = [replace(trial(config, variant, size, params), stage="pick") for size, params in picked.items()]
    rows = measure_trials(config, variant, mode, points, lambda i: f"audit {variant.key} class "
                          f"{points[i].size_class}'s pick", compiled) if points else []
    return [{"size": p.size_class, "params": p.params, **{k: r.get(k) for k in TRIAL_FIELDS}}
            for p, r in zip(points, rows)]


def served_shapes(config: dict, variant: registry.Variant, sizes) -> dict[int, list[plan.Shape]]:
    """The sweep's shapes (less those it skips) that each size class will run besides its own square."""
    served: dict[int, list[plan.Shape]] = {}
    for shape in plan.sweep_shapes(config, variant.workload):
        size = pick(dict.fromkeys(sizes), *shape.sizes.values())
        if plan.skip_reason(config, variant, shape) is None and set(shape.sizes.values()) != {size}:
            served.setdefault(size, []).append(shape)
    return served


def checked_where(config: dict, variant: registry.Variant, trials: list[dict],
                  classes: dict) -> dict[int, tuple[list[dict], list[plan.Shape]]]:
    """Each class's contenders (`contenders`) and the shapes it serves besides its own, where it serves any."""
    return {size: (contenders(trials, classes, size), shapes)
            for size, shapes in served_shapes(config, variant, [int(s) for s in classes]).items()}


def served_points(config: dict, checked: dict[int, tuple[list[dict], list[plan.Shape]]]) -> list[Point]:
    """The serving checks' points: each of a class's candidates at each shape the class serves (`checked`: class
    size -> (candidates, shapes))."""
    return [Point(shape.sizes, devices.seed_for(config["seed"], *shape.sizes.values()), params, size)
            for size, (candidates_, shapes) in checked.items() for shape in shapes for params in candidates_]


def contenders(trials: list[dict], classes: dict, size: int) -> list[dict]:
    """What a class's winner is checked against where the class serves: its runner-up at the class size and the
    winners of the neighbouring classes (distinct parameter sets, the winner first)."""
    ok = sorted((t for t in trials if t["size"] == size and t["status"] == "ok"), key=lambda t: t["median_s"])
    order = sorted(int(s) for s in classes)
    at = order.index(size)
    neighbours = [classes[str(s)]["params"] for s in order[max(0, at - 1):at + 2] if s != size]
    found = []
    for params in [classes[str(size)]["params"], *(t["params"] for t in ok[1:2]), *neighbours]:
        if params not in found:
            found.append(params)
    return found


NOISE = 0.02  # a share this close to another is a tie: two runs of one point differ by up to 2% (README "Measuring")


def kept_of(shares: dict[str, dict[str, float]], fastest: str) -> str:
    """Which candidate a class keeps, given each one's share at every shape it serves (`shares`): its `fastest` at
    its own size, unless another's lowest share beats the fastest's lowest by more than NOISE; then the candidate
    whose lowest share is highest. A near tie keeps the fastest, so the noise of a few samples never swaps winners."""
    lowest = {candidate: min(by_shape.values()) for candidate, by_shape in shares.items()}
    best = max(lowest, key=lowest.get)
    return best if lowest[best] > lowest[fastest] + NOISE else fastest


def check_served(config: dict, variant: registry.Variant, mode: str, trials: list[dict],
                 classes: dict, compiled: bool = False) -> tuple[dict, list[dict]]:
    """Each class's winner timed at every other sweep shape its class will run, beside its contenders
    (`contenders`). A candidate's share at a shape is the fastest contender's time there over its own (0 where it
    failed); a class keeps its fastest unless another's lowest share, its own size's included, is clearly higher
    (`kept_of`). So a winner that collapses at a size its class serves is refused for one that holds up there.
    Returns the classes (each with its shares, and the refused winner where there is one) and the check trials.
    `compiled`: the checks' kernels were compiled ahead; otherwise parallel workers compile them first."""
    if not classes:
        return classes, []
    checked = checked_where(config, variant, trials, classes)
    points = served_points(config, checked)
    if not points:
        return classes, []

    def label(point: Point) -> str:
        return plan.Shape.of(variant.workload, point.sizes.values()).label

    rows = measure_trials(config, variant, mode, points,
                          lambda i: f"check {variant.key} class {points[i].size_class} at {label(points[i])}",
                          compiled)
    checks = [{"size": p.size_class, "shape": label(p), "params": p.params, **{k: r.get(k) for k in TRIAL_FIELDS}}
              for p, r in zip(points, rows)]
    kept = dict(classes)
    for size, (candidates_, shapes) in checked.items():
        own_shape = plan.Shape.of(variant.workload, [size] * len(workloads.get(variant.workload).axes)).label
        timed = [{**t, "shape": own_shape} for t in trials if t["size"] == size] + \
            [t for t in checks if t["size"] == size]
        seconds = {(t["shape"], ident(t["params"])): t["median_s"] for t in timed if t["status"] == "ok"}

        def share(params, shape):
            fastest = min((seconds.get((shape, ident(p)), float("inf")) for p in candidates_))
            own = seconds.get((shape, ident(params)))
            return fastest / own if own else 0.0
        shares = {ident(p): {shape: share(p, shape) for shape in [own_shape, *(s.label for s in shapes)]}
                  for p in candidates_}
        winner = classes[str(size)]
        keep = kept_of(shares, ident(winner["params"]))
        best = next(p for p in candidates_ if ident(p) == keep)
        kept[str(size)] = {**winner, "served": shares[ident(best)]}
        if best != winner["params"]:
            refused = shares[ident(winner["params"])]
            worst = min(refused, key=refused.get)
            row = next(t for t in trials if t["size"] == size and t["params"] == best)
            kept[str(size)].update(params=best, median_s=row["median_s"], tflops=row["tflops"], refused={
                "params": winner["params"], "median_s": winner["median_s"], "worst_shape": worst,
                "share": refused[worst]})
            log.warning("%s %s: class %d's fastest %s refused: at %s it runs at %.0f%% of the fastest contender's "
                        "speed; kept %s", variant.key, mode, size, winner["params"], worst, 100 * refused[worst], best)
    return kept, checks


def plan_line(config: dict, variants: list[registry.Variant], device: str, gpu: str) -> str:
    """The run's plan in one line: what it measures (plan.summary), and where the tuned variants' parameters come
    from (a committed record for this GPU model, one transferred, or a search here, with the searches' estimated GPU
    time)."""
    line = plan.summary(config, variants, device, gpu)
    chosen = [(v, mode) for v in variants if device == "cuda" and plan.tuned(config, v, gpu)
              for mode in plan.modes(config, v)]
    if not chosen:
        return line
    host, sources, estimates = records.host_gpu(), dict.fromkeys(("committed", "transferred", "searched"), 0), []
    for v, mode in chosen:
        how = records.origin(config["tune"], v, mode, gpu, host)
        sources[how] += 1
        if how == "searched":
            estimates.append(estimate(config, v, mode))
    return (f"{line}; tuning for {gpu}: " + ", ".join(f"{n} {how}" for how, n in sources.items()) + " here"
            + _search_time(estimates))


def _search_time(estimates: list[tuple[float, str] | None]) -> str:
    """How long the searches here will take (`estimate`)."""
    if not estimates:
        return ""
    known = [e for e in estimates if e]
    said = [f"about {sum(s for s, _ in known) / 60:.0f} min of GPU time for their trials, checks and audits, "
            f"estimated from the trials of {', '.join(sorted({model for _, model in known}))}'s searches"] \
        if known else []
    if len(known) < len(estimates):
        said.append(f"{len(estimates) - len(known)} with no committed search to estimate from")
    return " (" + "; ".join(said) + ")"


def estimate(config: dict, variant: registry.Variant, mode: str) -> tuple[float, str] | None:
    """About how many seconds of GPU time a search of `variant` in `mode` here takes, from the trials of a committed
    search of it (on any GPU model: the first found), with the model it came from; None where no committed search of
    it was timed (a variant's own search, or none yet). Each trial is modelled from its median as this run's tune
    section would time it (its timing, narrow_to, and stop_behind: a trial behind the fastest timed before it at its
    size takes timing.behind_samples), and so are the serving checks of each class's fastest (its contenders at every
    shape the class serves, at that median scaled by the FLOPs) and the pick's audit; each point also costs what the
    committed trials that kept their seconds spent beyond their launches (`point_overhead_s`). Left out: the compiles,
    which other jobs make beside the GPU's, and each job's start and hand-offs to its worker."""
    tune = config["tune"]
    overhead_s = point_overhead_s(tune["timing"])
    for path in sorted(records.COMMITTED.glob(f"*/{variant.family}/{variant.name}/{mode}.json")):
        trials = [t for t in read_json(path).get("trials") or [] if t.get("status") == "ok" and t.get("median_s")]
        if not trials:
            continue
        sizes = sorted({t["size"] for t in trials})
        narrow = records.narrowed({"sizes": sizes, "narrow_to": tune["narrow_to"]})
        seconds, timed = 0.0, []
        for size in sizes:
            finalists = fastest([t for t in trials if t["size"] == narrow[size]], tune["narrow_to"]) \
                if size in narrow else None
            best = math.inf
            for t in trials:
                if t["size"] == size and (finalists is None or ident(t["params"]) in finalists):
                    behind = bool(tune["stop_behind"]) and t["median_s"] > tune["stop_behind"] * best
                    seconds += _timed_s(tune["timing"], t["median_s"], behind) + overhead_s
                    best = min(best, t["median_s"])
                    timed.append(t)
        classes = best_per_class(timed, sizes)
        flops = workloads.get(variant.workload).flops
        for size, (contending, shapes) in checked_where(config, variant, timed, classes).items():
            median_s, own = classes[str(size)]["median_s"], flops(dict.fromkeys(shapes[0].sizes, size))
            seconds += len(contending) * sum(_timed_s(tune["timing"], median_s * flops(s.sizes) / own) + overhead_s
                                             for s in shapes)
        for picked in classes.values():
            sampled_s = _timed_s(tune["timing"], picked["median_s"], launches=VALIDATION_LAUNCHES)
            seconds += sampled_s + min(sampled_s, timing.AUDIT_MAX_S) + overhead_s
        return seconds, path.parts[-4]
    return None


def point_overhead_s(timing_: dict) -> float:
    """The median of what each committed trial timed under `timing_` that kept its seconds spent beyond its modelled
    launches (`_timed_s`): its inputs, references and comparisons, and the accounting of its samples; 0 where none
    kept them."""
    return _point_overhead_s(json.dumps(timing_, sort_keys=True))


@functools.lru_cache(maxsize=None)  # read once per process: the plan line estimates every search with it
def _point_overhead_s(timing_json: str) -> float:
    timing_ = json.loads(timing_json)
    kept = (read_json(path) for path in records.COMMITTED.glob("*/*/*/*.json"))
    spent = [t["validate_s"] + t["measure_s"] - _timed_s(timing_, t["median_s"], t.get("stopped_by") == "behind")
             for record in kept if record.get("settings", {}).get("timing") == timing_
             for t in record.get("trials") or [] if t.get("measure_s") and t.get("median_s")]
    return max(0.0, float(statistics.median(spent))) if spent else 0.0


def _timed_s(timing_: dict, median_s: float, behind: bool = False, launches: int = TRIAL_VALIDATION_LAUNCHES) -> float:
    """A trial's seconds on the GPU, modelled from its median: its validation's launches, which its warm-up's count
    (the seconds of a stretch's warm-up are spent once, before its first trial), and its samples under `timing_`
    (the tune timing), or timing.behind_samples of them where it stops `behind`."""
    m, t = median_s, timing_
    sampling = timing.behind_samples(m) * m if behind else min(
        max(t["min_samples"] * m, t["min_time_s"]), max(t["budget_s"], t["min_samples"] * m), t["max_samples"] * m)
    return max(launches, t["warmup_runs"]) * m + sampling


TRIAL_FIELDS = ("status", "message", "median_s", "tflops", "rel_error", "registers", "compile_s", "throttled",
                "stopped_by", "validate_s", *TRIAL_TIMES)


def trial(config: dict, variant: registry.Variant, size: int, params: dict) -> Point:
    """A tune trial: `params` timed at the square shape of class `size`."""
    sizes = dict.fromkeys(workloads.get(variant.workload).axes, size)
    return Point(sizes, devices.seed_for(config["seed"], *sizes.values()), params, size)


def measure_trials(config: dict, variant: registry.Variant, mode: str, points: list[Point], describe,
                   compiled: bool = False, stop_behind: float = 0.0) -> list[dict]:
    """Rows of tune trials: the candidates compiled first by parallel workers that share the GPU (they launch
    nothing, as builds), unless they were `compiled` ahead (compile_trials), then validated and timed one after
    another by one supervised worker, which loads what they compiled from the caches. Each trial has the tune
    timing's watchdog: one that hangs costs that trial. `stop_behind` (tune.stop_behind; 0: never): a trial this
    many times behind the fastest timed at its shape in this batch stops sampling early (rows.behind_s)."""
    start = time.perf_counter()
    workers = compile_ahead(config, variant, mode, points)[0] if not compiled else 0
    ready = time.perf_counter()
    task = Task.of("tune", config, variant, mode, points)
    if stop_behind:
        task.timing = {**task.timing, "stop_behind": stop_behind}
    rows = run_task(task, task.timing["point_timeout_s"], describe)[0]
    log.info("%s %s: %d trials %s, validated and timed in %.1f s", variant.key, mode, len(points),
             f"compiled in {ready - start:.1f} s by {workers} workers" if not compiled else "compiled ahead",
             time.perf_counter() - ready)
    return rows


def own_search(config: dict, variant, mode: str, gpu: str, settings: dict, expected: str, committed: Path,
               work_dir: Path) -> dict:
    """A variant's own search per size class, each with its database under work_dir/<size>/, which a rerun resumes;
    an earlier committed result (other settings) seeds an empty database. The search proposes candidates; they are
    compiled, validated and timed here, as the generic search's are (`measure`). Each class keeps the candidates and
    seconds of every sitting, updated after each round (a sitting cut short keeps them)."""
    previous = read_json(committed)["classes"] if committed.exists() else {}
    classes = {}
    with gpus.pinned(variant.device) as env, gpus.environment(env):  # the search's own workers inherit it
        for size in settings["sizes"]:
            sittings = Sittings(work_dir / str(size), previous.get(str(size)))

            def measure(param_sets: list[dict]) -> list[dict]:
                log.info("%s %s n=%d: round %d proposed %d candidates, %.1f s after the previous round's end",
                         variant.key, mode, size, sittings.rounds + 1, len(param_sets), sittings.since_round())
                points = [trial(config, variant, size, params) for params in param_sets]
                rows = measure_trials(config, variant, mode, points, lambda i: f"tune {variant.key} n={size} "
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
            checked = audit(config, variant, mode, {size: found["params"]})[0]
            if checked["status"] != "ok":
                log.warning("%s %s: n=%d's pick %s failed its audit (%s); that class is left out", variant.key, mode,
                            size, found["params"], checked["message"])
                continue
            classes[str(size)] = {**found, **sittings.summary(), "audit": checked}
            log.info("%s %s n=%d: best of %d trials %.3f ms (%.1f TFLOP/s); %.0f s of tuning in %d sittings",
                     variant.key, mode, size, found["trials"], found["median_s"] * 1e3, found["tflops"],
                     classes[str(size)]["tune_s"], len(classes[str(size)]["sittings"]))
    return {"gpu": gpu, "variant": variant.key, "mode": mode, "key": expected, "settings": settings,
            "compilers": records.compilers(variant), "space": variant.space, "classes": classes}


class Sittings:
    """The sittings of one class's search (candidates measured, seconds), in work_dir/sittings.json, carried over
    from the committed result that seeded it; the current one is written after every round, and as the record has
    it when the class's search ends."""

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
        if self.candidates:  # the file a rerun resumes from says what the record says
            write_json(self.path, sittings)
        return {"tune_s": round(sum(s["seconds"] for s in sittings), 1), "sittings": sittings}

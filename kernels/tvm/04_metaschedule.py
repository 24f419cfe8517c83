"""MetaSchedule: TVM's own search over its GPU schedule space, tuned on the GPU the kernel will run on.

The space is MetaSchedule's CUDA default for a matmul: multi-level tiling (i and j split into block, virtual
thread, thread and two register levels; k into three), shared-memory caches of A and B filled by cooperative,
optionally vectorised fetches and software-pipelined with cp.async, a local accumulator and an unroll depth.
An XGBoost cost model picks which candidates to measure; each round is handed to the caller's `measure` as
parameter sets of this variant, so the tune stage builds, validates and times every candidate in its supervised
worker (the harness's timing; a watchdog per candidate, so one that hangs or crashes costs one trial).

Tuning (`search`, called by the tune stage) runs MetaSchedule's evolutionary search for one square size class
with a JSON database of its own. Rerunning counts the trials the database holds and runs only the rest, so a long
tuning can be spread over several sittings; an empty database is seeded with a committed result's best records.
The best record's trace is the variant's parameter set, unless the hand schedule beats it: the search ends with a
contest in one sitting, MetaSchedule's best CONTENDERS records timed again beside every valid parameter set of the
recipe rung (05_recipe.py), and the fastest is the variant's parameters ({"recipe": its set}). So the autotuner's row
is never below the hand schedule's at its class size, and the record lists each contender (`contest`: its source,
"metaschedule" or "recipe", and its time).

`schedule` applies that trace to any shape: the iteration space is padded to whole tiles of the tuned block
(pad_einsum; a reduction shorter than one k-tile to two of them), the trace is replayed with each axis's outermost
tile factor recomputed for the padded extent (the thread and register tiles stay as tuned), the padding is inlined
into the shared caches and the write-back (leaving predicates on the global reads and writes), and MetaSchedule's
postprocessors run again on the new loops.
"""
from __future__ import annotations

import itertools
import json
import logging
import math
from pathlib import Path
from typing import Mapping

# Set by the tune stage: the best record's trace and its shape, or the recipe's parameter set where that won
DEFAULTS = {"trace": None, "tuned_shape": None, "recipe": None}
SPACE: dict = {}  # not the generic tuner's: MetaSchedule searches its own space (`search`)
DESCRIPTION = ("MetaSchedule-tuned (its CUDA space, evolutionary search, XGBoost cost model), trace moved to each "
               "shape; its best records contend with the recipe rung's parameter sets")
RECIPE = "05_recipe.py"  # the hand schedule whose parameter sets contend with MetaSchedule's best
USES = (RECIPE,)  # schedules this one applies: their sources are part of its code (variants.sources)
CONTENDERS = 4  # MetaSchedule's best records timed again in the contest (their database times may be another sitting's)
SEED_RECORDS = 32  # the best records a result keeps, to seed an empty database on another machine
TRIALS_PER_ROUND = 64
# Accumulators per thread beyond which a candidate is refused unmeasured: cuBLAS's FP32 kernel holds 128 (8×16) at
# up to 255 registers; more spill to local memory, and compiling one costs seconds for nothing.
MAX_ACCUMULATORS = 128
# The limits MetaSchedule's GPU rules check; TVM's kernels use static shared memory, so 48 KiB.
CUDA_LIMITS = {"max_shared_memory_per_block": 48 * 1024, "max_threads_per_block": 1024, "thread_warp_size": 32,
               "registers_per_block": 65536}


def recipe():
    """The recipe rung's schedule module."""
    from kernels.tvm.variants import schedule_module

    return schedule_module(RECIPE)


def recipe_sets() -> list[dict]:
    """Every parameter set of the recipe rung's space that it accepts, its defaults first."""
    module = recipe()
    names = list(module.SPACE)
    sets = [module.DEFAULTS, *({**module.DEFAULTS, **dict(zip(names, combo))}
                               for combo in itertools.product(*module.SPACE.values()))]
    return [dict(p) for i, p in enumerate(sets) if module.check(p) is None and p not in sets[:i]]


def pass_config(p: Mapping) -> dict:
    """TVM's lowering options beside the family's: the recipe's where its parameter set won the contest."""
    return recipe().pass_config(p["recipe"]) if p.get("recipe") else {}


def check(p: Mapping) -> str | None:
    if p.get("recipe"):
        return recipe().check(p["recipe"])
    if not p.get("trace") or not p.get("tuned_shape"):
        return "no MetaSchedule record: the tune stage supplies one (tune.autotuner.trials > 0; see resources/tuning/)"
    return None


def target_for(target):
    """The target with the GPU limits MetaSchedule needs (a CUDA target), or as it is (llvm)."""
    import tvm

    target = tvm.target.Target(target)
    if target.kind.name != "cuda":
        return target
    return tvm.target.Target({**{k: v for k, v in target.export().items() if k in ("kind", "arch")}, **CUDA_LIMITS})


def as_module(func):
    """The PrimFunc as MetaSchedule keys its databases: an IRModule with one function, "main"."""
    import tvm

    return tvm.IRModule({"main": func.with_attr("global_symbol", "main").with_attr("tirx.noalias", True)})


def _postprocs(target) -> str:
    return "cuda" if target.kind.name == "cuda" else "llvm"


def _tiles(trace) -> list:
    """The trace's tile samples of the i, j and k loops, in that order (MultiLevelTiling samples them so)."""
    tiles = [inst for inst in trace.insts if inst.kind.name == "SamplePerfectTile"]
    if len(tiles) != 3:
        raise ValueError(f"expected tile samples for i, j and k in the tuned trace, found {len(tiles)}")
    return tiles


def accumulators(trace) -> int:
    """Output elements per thread of a CUDA trace: the i and j tiles below the thread level (virtual threads and
    the two register levels, "SSSRRSRS"), multiplied."""
    i, j, _ = (trace.decisions[t] for t in _tiles(trace))
    return math.prod(int(f) for f in (i[1], *i[3:], j[1], *j[3:]))


def tuned_trace(p: Mapping):
    """The trace of the best record, replayed on the shape it was tuned for (how TVM deserialises one)."""
    from tvm import s_tir

    from kernels.tvm.variants import matmul

    sch = s_tir.Schedule(as_module(matmul(*p["tuned_shape"])))
    s_tir.Trace.apply_json_to_schedule(p["trace"], sch)
    return sch.trace


def schedule(func, p: Mapping, target, bind: bool = True):
    """The tuned trace applied to the matmul PrimFunc `func` of any shape (see the module's docstring)."""
    from tvm import s_tir
    from tvm.s_tir import meta_schedule as ms

    if p.get("recipe"):
        return recipe().schedule(func, p["recipe"], target, bind)
    if not bind:
        raise ValueError("a MetaSchedule trace binds GPU threads itself: no unbound form")
    problem = check(p)
    if problem:
        raise ValueError(problem)
    target = target_for(target)
    trace = tuned_trace(p)
    tiles = _tiles(trace)
    inner = [math.prod(int(f) for f in trace.decisions[t][1:]) for t in tiles]  # the tuned block's tile per axis
    sch = s_tir.Schedule(as_module(func))
    block = sch.get_sblock("C")
    k = int(sch.get(sch.get_loops(block)[2]).extent)
    # A reduction of one tuned k-tile: padded to two, as a pipelined k loop of one iteration fails the GPU checks
    sch.pad_einsum(block, [*inner[:2], inner[2] * (2 if k <= inner[2] else 1)])
    extents = [int(sch.get(loop).extent) for loop in sch.get_loops(block)]

    def grown(inst, inputs, attrs, decision):
        for axis, tile in enumerate(tiles):
            if inst.same_as(tile):
                return [extents[axis] // inner[axis], *(int(f) for f in decision[1:])]
        return decision

    trace.apply_to_schedule(sch, remove_postproc=True, decision_provider=grown)
    for name in ("A_pad", "B_pad"):  # present only where the shape is not whole tiles
        if _has_block(sch, name):
            sch.compute_inline(sch.get_sblock(name))
    if _has_block(sch, "C_pad"):
        try:  # into the tuned write-back; without a cache write (CPU traces) it stays a copy loop of its own
            sch.reverse_compute_inline(sch.get_sblock("C_pad"))
        except s_tir.ScheduleError:
            pass
    context = ms.TuneContext(mod=sch.mod, target=target, space_generator=ms.space_generator.PostOrderApply(
        sch_rules=[], postprocs=_postprocs(target), mutator_probs={}), task_name="main")
    for postproc in context.space_generator.postprocs:
        if not postproc.apply(sch):
            raise ValueError(f"the tuned schedule does not fit this shape: {type(postproc).__name__} rejects it")
    return sch


def _has_block(sch, name: str) -> bool:
    return any(sch.get(b).name_hint == name for b in sch.get_child_blocks(sch.get_sblock("root")))


def search(shape: tuple[int, int, int], target, trials: int, work_dir: Path, committed: dict | None,
           seed: int, log: logging.Logger, measure) -> dict:
    """Tune the matmul of `shape` until the JSON database in `work_dir` stands for `trials` trials; the best record
    as this variant's parameters, with its time. `committed` (a previous result of this function) seeds an empty
    database; its records then count for the trials it stood for. `measure(param_sets)` times candidates given as
    this variant's parameters: one dict per candidate with "status" ("ok" or why not), "median_s" and "message"."""
    from tvm.s_tir import meta_schedule as ms

    from kernels.tvm.variants import matmul

    target = target_for(target)
    work_dir.mkdir(parents=True, exist_ok=True)
    database = ms.database.JSONDatabase(work_dir=str(work_dir))
    module = as_module(matmul(*shape))
    workload = database.commit_workload(module)
    seeded_path = work_dir / "seeded.json"
    if committed and len(database) == 0:
        for record in committed["records"]:
            database.commit_tuning_record(ms.database.TuningRecord.from_json(record, workload))
        seeded_path.write_text(json.dumps({"records": len(committed["records"]), "stands_for": committed["trials"]}))
        log.info("seeded the database with %d committed records (standing for %d trials)",
                 len(committed["records"]), committed["trials"])
    seeded = json.loads(seeded_path.read_text()) if seeded_path.exists() else {"records": 0, "stands_for": 0}

    def recorded() -> int:  # the trials the database stands for
        return len(database) - seeded["records"] + seeded["stands_for"]

    done = recorded()
    if done < trials:
        log.info("MetaSchedule %s on %s: %d trials recorded, running %d more (MetaSchedule's log: %s/logs)",
                 "x".join(map(str, shape)), target.export().get("arch", target.kind.name), done, trials - done,
                 work_dir)
        _tune(module, shape, target, work_dir, database, workload, trials - done, seed + done, measure, log)
        done = recorded()
    else:
        log.info("MetaSchedule %s: the database already stands for %d trials", "x".join(map(str, shape)), done)
    best = database.get_top_k(workload, SEED_RECORDS)
    if not best:
        raise RuntimeError(f"MetaSchedule measured no valid schedule in {done} trials (see {work_dir}/logs)")
    found = {"trace": plain(best[0].trace.as_json()), "tuned_shape": list(shape), "recipe": None}
    median_s = sorted(float(s) for s in best[0].run_secs)[len(best[0].run_secs) // 2]
    contest = []
    if target.kind.name == "cuda":  # the recipe is a GPU schedule
        found, median_s, contest = _contest(best, shape, found, median_s, measure, log)
    return {"params": found, "median_s": median_s, "tflops": 2 * math.prod(shape) / median_s / 1e12, "trials": done,
            "records": [plain(r.as_json()) for r in best], "contest": contest}


def _contest(best, shape, found: dict, median_s: float, measure, log) -> tuple[dict, float, list[dict]]:
    """MetaSchedule's best CONTENDERS records and every recipe parameter set, timed in one sitting: the fastest
    (its parameters and time), and each contender's outcome. Where none passes, MetaSchedule's database best stays."""
    sets = [{"trace": plain(r.trace.as_json()), "tuned_shape": list(shape), "recipe": None} for r in best[:CONTENDERS]]
    sets += [{"trace": None, "tuned_shape": list(shape), "recipe": p} for p in recipe_sets()]
    rows = measure(sets)
    contest = [{"source": "recipe" if p["recipe"] else "metaschedule", "record": None if p["recipe"] else i,
                "recipe": p["recipe"], "status": row["status"],
                "median_s": row.get("median_s") if row["status"] == "ok" else None}
               for i, (p, row) in enumerate(zip(sets, rows))]
    ok = [(row["median_s"], i) for i, row in enumerate(rows) if row["status"] == "ok"]
    if not ok:
        log.warning("MetaSchedule's contest: no contender passed; its database's best stays")
        return found, median_s, contest
    fastest, i = min(ok)
    log.info("MetaSchedule's contest at %s: a %s set fastest of %d (%.3f ms)", "x".join(map(str, shape)),
             contest[i]["source"], len(ok), fastest * 1e3)
    return sets[i], fastest, contest


def _search_log(work_dir: Path) -> logging.Logger:
    """MetaSchedule's own log of a search (its rounds, the cost model's fit), in work_dir/logs/main.log."""
    logger = logging.getLogger(f"gemmbench.metaschedule.{work_dir.resolve()}")
    if not logger.handlers:
        (work_dir / "logs").mkdir(exist_ok=True)
        logger.addHandler(logging.FileHandler(work_dir / "logs" / "main.log"))
        logger.setLevel(logging.INFO)
        logger.propagate = False
    return logger


FAILED_S = 1e10  # a candidate that failed, as MetaSchedule's own AddToDatabase records it (never among the best)


def _tune(module, shape, target, work_dir: Path, database, workload, trials: int, seed: int, measure, log) -> None:
    """MetaSchedule's evolutionary search (tune_tir's, for one task) with the measuring done by `measure`: each
    round's candidates are handed over as parameter sets (their traces), so they are built and timed exactly as the
    variant runs, by whoever measures. Each round is committed to the database as it comes back, so a sitting that
    is cut short keeps its finished rounds."""
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.meta_schedule.runner import RunnerResult

    context = ms.TuneContext(mod=module, target=target, space_generator="post-order-apply",
                             search_strategy="evolutionary", task_name="main", rand_state=seed,
                             num_threads="physical", logger=_search_log(work_dir))
    cost_model = ms.CostModel.create("xgb", num_tuning_cores=ms.utils.cpu_count(logical=False), tree_method="auto")
    context.pre_tuning(max_trials=trials, num_trials_per_iter=min(TRIALS_PER_ROUND, trials),
                       design_spaces=context.generate_design_space(), database=database, cost_model=cost_model)
    measured = 0
    while measured < trials:
        candidates = context.generate_measure_candidates()
        if not candidates:
            break
        oversized = [target.kind.name == "cuda" and accumulators(c.sch.trace) > MAX_ACCUMULATORS for c in candidates]
        asked = [{"trace": plain(c.sch.trace.as_json()), "tuned_shape": list(shape)}
                 for c, skip in zip(candidates, oversized) if not skip]
        measured_rows = iter(measure(asked) if asked else [])
        rows = [{"status": "refused", "message": f"over {MAX_ACCUMULATORS} accumulators per thread"} if skip
                else next(measured_rows) for skip in oversized]
        results = [RunnerResult([row["median_s"]], None) if row["status"] == "ok" else
                   RunnerResult(None, f"{row['status']}: {row['message']}") for row in rows]
        for candidate, result in zip(candidates, results):
            database.commit_tuning_record(ms.database.TuningRecord(
                candidate.sch.trace, workload, result.run_secs or [FAILED_S], target, candidate.args_info))
        cost_model.update(context, candidates, results)
        context.notify_runner_results(candidates, results)
        measured += len(candidates)
        ok = [row["median_s"] for row in rows if row["status"] == "ok"]
        log.info("MetaSchedule round: %d candidates, %d refused unmeasured, %d ok, fastest %s; %d of %d trials "
                 "this sitting", len(rows), sum(oversized), len(ok), f"{min(ok) * 1e3:.3f} ms" if ok else "none",
                 measured, trials)
    context.post_tuning()


def plain(obj):
    """TVM's JSON-style objects (which keep IntImm and FloatImm) as plain JSON values, as its database writes them."""
    if isinstance(obj, (list, tuple)):
        return [plain(x) for x in obj]
    if isinstance(obj, dict):
        return {str(k): plain(v) for k, v in obj.items()}
    return obj.value if hasattr(obj, "value") else obj

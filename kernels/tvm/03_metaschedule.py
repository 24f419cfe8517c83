"""MetaSchedule: TVM's own search over its GPU schedule space, tuned on the GPU the kernel will run on.

The space is MetaSchedule's CUDA default for a matmul: multi-level tiling (i and j split into block, virtual
thread, thread and two register levels; k into three), shared-memory caches of A and B filled by cooperative,
optionally vectorised fetches and software-pipelined with cp.async, a local accumulator and an unroll depth.
An XGBoost cost model picks which candidates to measure; each is compiled and timed as the family runs it
(measure.py).

Tuning (`search`, called by the tune stage) runs `tune_tir` for one square size class with a JSON database of its
own. Rerunning counts the trials the database holds and runs only the rest, so a long tuning can be spread over
several sittings; an empty database is seeded with a committed result's best records. The best record's trace is
the variant's parameter set.

`schedule` applies that trace to any shape: the iteration space is padded to whole tiles of the tuned block
(pad_einsum), the trace is replayed with each axis's outermost tile factor recomputed for the padded extent (the
thread and register tiles stay as tuned), the padding is inlined into the shared caches and the write-back
(leaving predicates on the global reads and writes), and MetaSchedule's postprocessors run again on the new loops.
"""
from __future__ import annotations

import functools
import json
import logging
import math
from pathlib import Path
from typing import Mapping

DEFAULTS = {"trace": None, "tuned_shape": None}  # set by the tune stage: the best record's trace and its shape
SPACE: dict = {}  # not the generic tuner's: MetaSchedule searches its own space (`search`)
DESCRIPTION = "MetaSchedule-tuned (tune_tir with its CUDA space and XGBoost cost model), trace moved to each shape"
SEED_RECORDS = 32  # the best records a result keeps, to seed an empty database on another machine
TRIALS_PER_ROUND = 64
LLVM_TIMEOUT_S = 3600  # TVM's builder and runner on the llvm target (the CPU tests): long enough for any machine
# The limits MetaSchedule's GPU rules check; TVM's kernels use static shared memory, so 48 KiB.
CUDA_LIMITS = {"max_shared_memory_per_block": 48 * 1024, "max_threads_per_block": 1024, "thread_warp_size": 32,
               "registers_per_block": 65536}


def check(p: Mapping) -> str | None:
    if not p.get("trace") or not p.get("tuned_shape"):
        return "no MetaSchedule record: the tune stage supplies one (tune.autotuner.trials > 0; see config/tuning/)"
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


def tuned_trace(p: Mapping):
    """The trace of the best record, replayed on the shape it was tuned for (how TVM deserialises one)."""
    from tvm import s_tir

    from kernels.tvm.family import matmul

    sch = s_tir.Schedule(as_module(matmul(*p["tuned_shape"])))
    s_tir.Trace.apply_json_to_schedule(p["trace"], sch)
    return sch.trace


def schedule(func, p: Mapping, target, bind: bool = True):
    """The tuned trace applied to the matmul PrimFunc `func` of any shape (see the module's docstring)."""
    from tvm import s_tir
    from tvm.s_tir import meta_schedule as ms

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
    sch.pad_einsum(block, inner)
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
           seed: int, log: logging.Logger) -> dict:
    """Tune the matmul of `shape` until the JSON database in `work_dir` stands for `trials` trials; the best record
    as this variant's parameters, with its time. `committed` (a previous result of this function) seeds an empty
    database; its records then count for the trials it stood for."""
    from tvm.s_tir import meta_schedule as ms

    from kernels.tvm.family import matmul

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
        log.info("MetaSchedule %s on %s: %d trials recorded, running %d more (progress: %s/logs)",
                 "x".join(map(str, shape)), target.export().get("arch", target.kind.name), done, trials - done,
                 work_dir)
        ms.tune_tir(module, target, str(work_dir), max_trials_global=trials - done,
                    num_trials_per_iter=min(TRIALS_PER_ROUND, trials - done), database=database, seed=seed,
                    **_measurement(target, shape))
        done = recorded()
    else:
        log.info("MetaSchedule %s: the database already stands for %d trials", "x".join(map(str, shape)), done)
    best = database.get_top_k(workload, SEED_RECORDS)
    if not best:
        raise RuntimeError(f"MetaSchedule measured no valid schedule in {done} trials (see {work_dir}/logs)")
    median_s = sorted(float(s) for s in best[0].run_secs)[len(best[0].run_secs) // 2]
    return {"params": {"trace": plain(best[0].trace.as_json()), "tuned_shape": list(shape)}, "median_s": median_s,
            "tflops": 2 * math.prod(shape) / median_s / 1e12, "trials": done,
            "records": [plain(r.as_json()) for r in best]}


def _measurement(target, shape) -> dict:
    """How candidates are built and timed: on a GPU as the family runs them, in this process (measure.py says
    why); on a CPU (the tests' llvm target) by TVM's own LocalBuilder and LocalRunner."""
    if target.kind.name != "cuda":
        return _local_measurement()
    from kernels.tvm import measure

    return {"builder": measure.SourceBuilder(), "runner": measure.CupyRunner(shape)}


@functools.cache
def _local_measurement() -> dict:
    """TVM's LocalBuilder and LocalRunner, made once per process: their worker pools each import TVM's tensor
    intrinsics when they start (42 s on a loaded 2-core CI box), so they are kept for every later search. TVM's
    30 s default timeout is shorter than that start on a slow machine: here a timeout bounds a hang, not the work."""
    from tvm.s_tir.meta_schedule import builder, runner

    return {"builder": builder.LocalBuilder(timeout_sec=LLVM_TIMEOUT_S),
            "runner": runner.LocalRunner(timeout_sec=LLVM_TIMEOUT_S)}


def plain(obj):
    """TVM's JSON-style objects (which keep IntImm and FloatImm) as plain JSON values, as its database writes them."""
    if isinstance(obj, (list, tuple)):
        return [plain(x) for x in obj]
    if isinstance(obj, dict):
        return {str(k): plain(v) for k, v in obj.items()}
    return obj.value if hasattr(obj, "value") else obj

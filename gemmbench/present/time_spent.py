"""Where a run's time went: each job's wall time (Snakemake's benchmark files, results/benchmarks/<rule>/...) and,
inside the measure jobs, what the rows say their seconds were spent on. The GPU's jobs run one after another, so
their sum is the run's serial path; the builds run beside them on the CPU."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from gemmbench.tuning import records

CPU_STAGES = ("tune_compile", "tune_check_compile", "tune_code", "build", "aggregate", "plot")  # beside, or after
# A search's jobs on the GPU, and its compiles beside them (tune_trials and tune_check_compile: a variant compiled
# per shape)
TUNE_GPU_STAGES, TUNE_CPU_STAGES = ("tune", "tune_trials"), ("tune_compile", "tune_check_compile")

# The parts of the measure jobs' time, in the order they are drawn, each with what it is
MEASURE_PARTS = {
    "kernel": "the sampled launches' own device time",
    "accounting": "fresh inputs, a poisoned output and Freivalds' test around every sample",
    "checks": "the audits after sampling (launches checked in full against the fp64 reference)",
    "settle": "waiting for the clocks to settle before sampling",
    "warm-up": "warm-up launches",
    "lock wait": "waiting for the GPU to be free of other processes' contexts (builds starting or ending)",
    "validation": "validation launches and their comparison",
    "fp64 reference": "the fp64 reference products (validation's and the timed points')",
    "kernel loading": "each size class's kernel built in the measure job's worker (compiled, or loaded from caches)",
    "job overhead": "the rest of the measure jobs: the worker's start, imports, hand-offs",
}


def job_walls(folder: Path) -> pd.DataFrame:
    """One row per job that left a benchmark file: its stage (the rule) and its wall seconds."""
    rows = [{"stage": path.relative_to(folder).parts[0], "job": str(path.relative_to(folder).with_suffix("")),
             "wall_s": float(pd.read_csv(path, sep="\t")["s"].iloc[0])}
            for path in sorted(Path(folder).rglob("*.tsv"))]
    return pd.DataFrame(rows, columns=["stage", "job", "wall_s"])


def _total(frame: pd.DataFrame, column: str) -> float:
    return float(pd.to_numeric(frame[column], errors="coerce").fillna(0).sum()) if column in frame else 0.0


def measure_parts(summary: pd.DataFrame, validation: pd.DataFrame, measure_wall_s: float) -> dict[str, float]:
    """Seconds of the measure jobs by part (MEASURE_PARTS), from the rows of this run's summary and validation."""
    timed = summary.loc[summary["status"] != "skipped"] if "status" in summary else summary
    validate, reference = _total(validation, "validate_s"), _total(validation, "fp64_reference_s")
    parts = {**timing_parts(timed),
             "lock wait": _total(timed, "quiet_wait_s"), "validation": max(0.0, validate - reference),
             "fp64 reference": reference,
             "kernel loading": _total(timed, "load_s") + _total(validation, "load_s")}
    parts["job overhead"] = max(0.0, measure_wall_s - sum(parts.values()))
    return parts


def timing_parts(timed: pd.DataFrame) -> dict[str, float]:
    """Seconds of timed rows (points, or a search's trials) by part: the kernel, accounting, checks, settling and the
    rest of their measure_s, the warm-up."""
    kernel = _total(timed, "kernel_s") if "kernel_s" in timed else \
        _total(timed.assign(product=pd.to_numeric(timed.get("samples"), errors="coerce")
                            * pd.to_numeric(timed.get("median_s"), errors="coerce")), "product")
    parts = {"kernel": kernel, "accounting": _total(timed, "sampling_overhead_s"), "checks": _total(timed, "check_s"),
             "settle": _total(timed, "settle_s")}
    return {**parts, "warm-up": max(0.0, _total(timed, "measure_s") - sum(parts.values()))}


def breakdown(summary: pd.DataFrame, validation: pd.DataFrame, walls: pd.DataFrame,
              tuned: Path | None = None) -> dict | None:
    """The run's time: the GPU's serial path (tune, the measure jobs by part, profile) and the CPU's jobs, in
    seconds, and the searches this run made (`searches`, from the tune results under `tuned`); None where no job
    left a benchmark file (a run from before they were kept)."""
    if walls.empty:
        return None
    by_stage = walls.groupby("stage")["wall_s"].sum()
    found = searches(walls, tuned) if tuned else []
    held = contests(tuned) if tuned else []
    tune = float(sum(by_stage.get(stage, 0.0) for stage in TUNE_GPU_STAGES))
    # a tune job that reuses a record asks for no GPU: only the searches' jobs are on the GPU's path
    searched = sum(s["gpu_s"] or 0.0 for s in found) if tuned else tune
    gpu = {"tune": searched, **measure_parts(summary, validation, float(by_stage.get("measure", 0.0))),
           "profile": float(by_stage.get("profile_variant", 0.0))}
    cpu = {stage: float(by_stage[stage]) for stage in CPU_STAGES if stage in by_stage}
    if round(tune - searched, 1) > 0:  # a search's jobs, summed two ways, differ by float rounding
        cpu[REUSED] = tune - searched
    return {"gpu_path": {part: seconds for part, seconds in gpu.items() if seconds > 0}, "cpu": cpu,
            "jobs": walls.groupby("stage")["wall_s"].agg(["count", "sum"]).reset_index(), "searches": found,
            "contests": held}


REUSED = "tune (records reused)"


def of_run(summary: pd.DataFrame, validation: pd.DataFrame, results: Path) -> dict | None:
    """`breakdown` of the run whose results folder is `results` (its benchmarks/ and tune/ beside its tables/)."""
    return breakdown(summary, validation, job_walls(Path(results) / "benchmarks"), Path(results) / "tune")


def tune_results(tuned: Path):
    """(job, record) of each tune result under `tuned` (results/tune/): its job name, e.g. h100/cupy/a/fp32."""
    for path in records.record_paths(tuned):
        yield str(path.relative_to(tuned).with_suffix("")), json.loads(path.read_text())


def searches(walls: pd.DataFrame, tuned: Path) -> list[dict]:
    """Each search this run made (a tune result under `tuned`, results/tune/, that reuses no committed or transferred
    record): its variant and mode, its trials and their outcomes (validated, stopped behind), and the seconds of its
    jobs (compiling ahead beside the GPU's jobs, the tune job that validated and timed them on the GPU, and the
    tune_code job beside that made the record)."""
    seconds = dict(zip(walls["job"], walls["wall_s"]))
    found = []
    for job, record in tune_results(tuned):
        if record.get("reused_from"):
            continue
        trials = record.get("trials") or []
        own = sum(int(c.get("trials", 0)) for c in record.get("classes", {}).values()) if not trials else 0
        found.append({"variant": record.get("variant", job), "mode": record.get("mode", ""),
                      "trials": len(trials) or own,
                      "ok": sum(1 for t in trials if t.get("status") == "ok") if trials else None,
                      "behind": sum(1 for t in trials if t.get("stopped_by") == "behind") if trials else None,
                      "checks": len(record.get("checks", [])), "refused": refused(record),
                      "compile_s": summed(seconds, TUNE_CPU_STAGES, job),
                      "gpu_s": summed(seconds, TUNE_GPU_STAGES, job), "code_s": seconds.get(f"tune_code/{job}"),
                      "parts": trial_parts([*trials, *record.get("checks", []), *record.get("audits", [])])})
    return found


def summed(seconds: dict[str, float], stages: tuple[str, ...], job: str) -> float | None:
    """The wall seconds of `job`'s jobs in `stages`, None where none left a benchmark file."""
    found = [seconds[f"{stage}/{job}"] for stage in stages if f"{stage}/{job}" in seconds]
    return sum(found) if found else None


def trial_parts(trials: list[dict]) -> dict[str, float]:
    """Where a search's trials (its candidates, serving checks and the audits of its picks) spent their seconds, as
    the measure jobs' parts (MEASURE_PARTS): their validation, and of their timing the kernel, accounting, checks,
    settling and the rest (warm-up); empty for a record from before trials kept them."""
    timed = pd.DataFrame([t for t in trials if t.get("measure_s") is not None])
    return {"validation": _total(timed, "validate_s"), **timing_parts(timed)} if not timed.empty else {}


def contests(tuned: Path) -> list[dict]:
    """Each size class whose search ended in a contest (a tune result under `tuned`, searched in this run or reused,
    whose class lists its `contest`: contenders from several sources timed in one sitting): the fastest source and
    its time, and the fastest of the others."""
    found = []
    for _, record in tune_results(tuned):
        for size, tuned_class in record.get("classes", {}).items():
            best: dict[str, float] = {}
            for entry in tuned_class.get("contest", []):
                source = entry.get("source")
                if source and entry.get("status") == "ok" and entry.get("median_s"):
                    best[source] = min(best.get(source, entry["median_s"]), entry["median_s"])
            if len(best) < 2:
                continue
            winner, runner_up = sorted(best, key=best.get)[:2]
            found.append({"variant": record.get("variant", ""), "mode": record.get("mode", ""), "size": size,
                          "contenders": len(tuned_class["contest"]), "winner": winner, "winner_ms": 1e3 * best[winner],
                          "runner_up": runner_up, "runner_up_ms": 1e3 * best[runner_up],
                          "origin": record.get("reused_from") or "searched in this run"})
    return found


def refused(record: dict) -> str:
    """The class winners a search refused, each with the shape its class serves where it fell furthest behind."""
    return "; ".join(f"class {size}: {json.dumps(c['refused']['params'])} at {c['refused']['worst_shape']} ran at "
                     f"{100 * c['refused']['share']:.0f}% of {json.dumps(c['params'])}"
                     for size, c in record.get("classes", {}).items() if c.get("refused"))

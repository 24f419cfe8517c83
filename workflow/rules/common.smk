# Plan and helpers shared by every rule: the config is validated here, before any job runs.
import json
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError

# This workflow's gemmbench and kernels, here and in every job, run by this interpreter (see first_on_path).
sys.path.insert(0, workflow.basedir)

from gemmbench import configuration, first_on_path, logs, plan, workloads
from gemmbench.configuration import ConfigError
from gemmbench.measure import provenance
from gemmbench.present import views
from gemmbench.run import locks
from gemmbench.stages.common import config_for
from gemmbench.tuning import records, search
from kernels.registry import MODES

first_on_path(workflow.basedir)

log = logs.setup()

if workflow.is_main_process:  # before Snakemake takes the directory's lock: a killed run's lock is let go here
    locks.release_if_stale(Path.cwd(), sys.argv)

try:
    _validated = configuration.validate(config)
    config.clear()
    config.update(_validated)  # scripts see the validated config, defaults filled in
    if config["device"] == "auto" and not workflow.is_main_process:
        raise ConfigError("device: auto cannot be resolved on a remote node; set device: cuda or cpu")
    DEVICE, DEVICE_REASON = plan.resolve_device(config["device"])
    VARIANTS = {v.key: v for v in plan.variants(config, DEVICE)}
    GPU = plan.gpu_model(config) if DEVICE == "cuda" else "cpu"  # names the tuning results
    config["compare_with"] = plan.reference(config, DEVICE, GPU)  # the report's reference run ("" for none)
except ConfigError as exc:
    raise WorkflowError(str(exc)) from None


onstart:
    locks.record_owner(Path.cwd(), sys.argv)
    # On a cluster each job plans again on its node: what a host decides for itself (is there a GPU, which model)
    # must be fixed in the config, or the nodes would plan other jobs than the submit host. (The executor is known
    # from here on, not while the Snakefile is read.)
    if not workflow.local_exec:
        if config["device"] == "auto":
            raise WorkflowError(
                "device: auto is decided by each host that plans, on a cluster the submit host and "
                "every node: set device: cuda (or cpu)"
            )
        if not config["tune"]["gpu"] and any(plan.tuned(config, v) for v in VARIANTS.values()):
            raise WorkflowError(
                "on a cluster, tuned variants need tune.gpu: the GPU model they are tuned for, "
                "e.g. --config tune='{gpu: NVIDIA H200}'"
            )
    # Only when jobs really run here (not in dry runs, --touch, or on a cluster submit host).
    if DEVICE == "cuda" and workflow.local_exec and not workflow.touch:
        try:
            plan.require_gpu()
        except ConfigError as exc:
            raise WorkflowError(str(exc)) from None
        if "gpu" not in workflow.global_resources:
            raise WorkflowError(
                "GPU jobs need a limit so that two never share a GPU: pass --resources gpu=N "
                "(N = GPUs here; the default profile in workflow/profiles/default sets gpu=1)"
            )


if workflow.is_main_process:
    log.info("%s", search.plan_line(config, list(VARIANTS.values()), DEVICE, GPU))

if DEVICE_REASON:
    log.warning("=" * 72 + "\n  %s\n" + "=" * 72, DEVICE_REASON.upper())


wildcard_constraints:
    family="[a-z][a-z0-9]*",
    variant="[A-Za-z0-9_.-]+",
    mode="|".join(MODES),
    gpu="[a-z0-9-]+",


def variant_of(wildcards):
    return VARIANTS[f"{wildcards.family}/{wildcards.variant}"]


def variant_sources(wildcards):
    """The files that determine the variant (its kernel, launch code and shared helpers): editing one re-runs its
    tune, build, validation and bench."""
    return records.determining_files(variant_of(wildcards))


def tuning_result(wildcards):
    """The tune stage's result for a variant that has a search space (unless tuning is off or its params are set)."""
    variant = variant_of(wildcards)
    if DEVICE != "cuda" or not plan.tuned(config, variant):
        return []
    return f"results/tune/{GPU}/{variant.family}/{variant.name}/{wildcards.mode}.json"


def gpus_needed(wildcards):
    return 1 if variant_of(wildcards).device == "cuda" else 0


def threads_needed(wildcards):
    """CPU variants use every core they may, so nothing else runs beside them while they are measured: here all of
    --cores; on a cluster, where --cores counts the cores of every job at once, the profile's max-threads."""
    if variant_of(wildcards).device != "cpu":
        return 1
    if workflow.local_exec:
        return workflow.cores
    if not workflow.resource_settings.max_threads:
        raise WorkflowError("on a cluster, CPU variants take max-threads cores: set it in the profile")
    return workflow.resource_settings.max_threads


def planned(pattern):
    """Every (variant, mode) path of the plan."""
    return [
        pattern.format(family=v.family, variant=v.name, mode=mode)
        for v in VARIANTS.values()
        for mode in plan.modes(config, v)
    ]


def planned_on_gpu(pattern):
    """Every (variant, mode) path of the plan's GPU variants (the profile stage's)."""
    return [
        pattern.format(family=v.family, variant=v.name, mode=mode)
        for v in VARIANTS.values()
        if v.device == "cuda"
        for mode in plan.modes(config, v)
    ]


def committed_tuning(wildcards):
    """The committed tuning result the tune stage reads for this GPU model, where there is one: committing a new one
    re-runs the tune job (and so everything after it)."""
    path = records.committed_path(wildcards.gpu, variant_of(wildcards), wildcards.mode)
    return [str(path)] if path.exists() else []


def searched_here(wildcards) -> bool:
    """Whether the tune job searches on this GPU (no committed or transferred result stands for it)."""
    where = records.origin(
        config["tune"],
        variant_of(wildcards),
        wildcards.mode,
        wildcards.gpu,
        records.facts_for(wildcards.gpu),
    )
    return where == "searched"


def tune_compiled(wildcards):
    """Where the tune job will search its space (the generic search), its candidates compiled ahead by a job of its
    own, beside the GPU's jobs."""
    variant = variant_of(wildcards)
    if not searched_here(wildcards) or variant.tuner:
        return []
    return f"results/tune/{wildcards.gpu}/{variant.family}/{variant.name}/{wildcards.mode}.compiled.json"


def tune_timed(wildcards):
    """A variant whose kernels are specialised per shape (TVM's), searched here, has its trials timed by a tune_trials
    job and its serving checks' kernels compiled by a tune_check_compile job beside the GPU's jobs, before the tune job
    checks and audits the picks: otherwise the tune job would compile them while it holds the GPU."""
    variant = variant_of(wildcards)
    if not variant.prepare or not tune_compiled(wildcards):
        return {}
    stem = f"results/tune/{wildcards.gpu}/{variant.family}/{variant.name}/{wildcards.mode}"
    return {"timed": f"{stem}.trials.json", "checks_compiled": f"{stem}.checks.json"}


def gpu_first(holds_gpu):
    """The priority of a job that may hold the GPU (holds_gpu(wildcards): its GPUs): above every job that holds none, a
    search's compiles (1) included, so that the GPU's next job takes the first core that frees. A search's compiles
    take all cores but one, and where a build or tune_code took that one, the GPU waited with ready jobs
    (reports/examples/h100-first-run/per-shape-first)."""
    return lambda wildcards: 2 if holds_gpu(wildcards) else 0


def compile_threads(wildcards):
    """A search's compiles take all cores but the one the GPU's job needs: one such job at a time, each of its
    workers with a CUDA context of its own (on a cluster, the profile's max-threads, else one)."""
    if workflow.local_exec:
        return max(1, workflow.cores - 1)
    return workflow.resource_settings.max_threads or 1


def tuning_gpus(wildcards):
    """Reusing a committed tuning result needs no GPU, so it does not wait for one."""
    return gpus_needed(wildcards) if searched_here(wildcards) else 0

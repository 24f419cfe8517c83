# Plan and helpers shared by every rule: the config is validated here, before any job runs.
import inspect
import os
import sys

from snakemake.exceptions import WorkflowError

sys.path.insert(0, workflow.basedir)
# Script jobs run in their own interpreter: let them import gemmbench and kernels too.
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [workflow.basedir, os.environ.get("PYTHONPATH")]))

from gemmbench import config as gemmbench_config, logs, plan
from gemmbench.config import ConfigError

log = logs.setup()

try:
    _validated = gemmbench_config.validate(config)
    config.clear()
    config.update(_validated)  # scripts see the validated config, defaults filled in
    if config["device"] == "auto" and not workflow.is_main_process:
        raise ConfigError("device: auto cannot be resolved on a remote node; set device: cuda or cpu")
    # Hosts that only plan (dry runs, cluster submission) need not have the GPU the jobs will use.
    planning_only = workflow.dryrun or not workflow.local_exec
    DEVICE, DEVICE_REASON = plan.resolve_device(config["device"], 1 if planning_only and config["device"] == "cuda" else None)
    VARIANTS = {v.key: v for v in plan.variants(config, DEVICE)}
    SWEEP = [s.label for s in plan.sweep_shapes(config)]
except ConfigError as exc:
    raise WorkflowError(str(exc)) from None

if DEVICE_REASON:
    log.warning("=" * 72 + "\n  %s\n" + "=" * 72, DEVICE_REASON.upper())


wildcard_constraints:
    family="[a-z]+",
    variant="[A-Za-z0-9_.-]+",
    mode="fp32|tf32",
    shape=r"\d+x\d+x\d+",


def variant_of(wildcards):
    return VARIANTS[f"{wildcards.family}/{wildcards.variant}"]


def variant_source(wildcards):
    """The variant's own source file: editing a kernel rebuilds, revalidates and re-benchmarks it."""
    return inspect.getsourcefile(variant_of(wildcards).build)


def gpus_needed(wildcards):
    return 1 if variant_of(wildcards).device == "cuda" else 0


def threads_needed(wildcards):
    """CPU variants use every core, so nothing else runs beside them while they are measured."""
    return workflow.cores if variant_of(wildcards).device == "cpu" else 1


def planned(pattern, with_shapes=False):
    """Every (variant, mode[, sweep shape]) path of the plan."""
    return [
        pattern.format(family=v.family, variant=v.name, mode=mode, shape=shape)
        for v in VARIANTS.values()
        for mode in plan.modes(config, v)
        for shape in (SWEEP if with_shapes else [None])
    ]


def cache_dir(wildcards):
    return f"results/build/{wildcards.family}/{wildcards.variant}/{wildcards.mode}.d"

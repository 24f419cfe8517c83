"""The experiment plan: which (variant, mode, shape) points exist, derived from a validated config."""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from gemmbench import ROOT, workloads
from gemmbench.configuration import ConfigError
from kernels import registry

log = logging.getLogger("gemmbench")


@dataclass(frozen=True)
class Shape:
    """One point's sizes along its workload's axes (gemm: m, n, k; b2b: m, k0, n0, n1)."""

    dims: tuple[tuple[str, int], ...]  # (axis, size) in the workload's order
    kind: str = "sweep"  # "sweep" (validated and benchmarked) or "awkward" (validated only)
    workload: str = "gemm"

    @classmethod
    def of(cls, workload: str, sizes, kind: str = "sweep") -> "Shape":
        axes = workloads.get(workload).axes
        if len(sizes) != len(axes):
            raise ConfigError(f"a {workload} shape has {len(axes)} sizes ({', '.join(axes)}), not {list(sizes)}")
        return cls(tuple(zip(axes, (int(x) for x in sizes))), kind, workload)

    @classmethod
    def parse(cls, label: str, workload: str = "gemm", kind: str = "sweep") -> "Shape":
        return cls.of(workload, workloads.get(workload).parse(label).values(), kind)

    @property
    def sizes(self) -> dict[str, int]:
        return dict(self.dims)

    @property
    def label(self) -> str:
        return workloads.get(self.workload).label(self.sizes)


def gpu_count() -> int:
    try:
        import cupy
        return cupy.cuda.runtime.getDeviceCount()
    except Exception:  # no driver, no libcuda, no GPU: all mean "none usable here"
        return 0


def resolve_device(requested: str, gpus: int | None = None) -> tuple[str, str]:
    """(device, reason). 'auto' falls back to the CPU, with a reason that the log and report show.
    'cuda' is taken as asked: hosts that only plan (dry runs, cluster submission) need no GPU."""
    if requested != "auto":
        return requested, ""
    if (gpu_count() if gpus is None else gpus) > 0:
        return "cuda", ""
    return "cpu", "no GPU visible on this host: the CPU families only"


def require_gpu(gpus: int | None = None) -> None:
    """Before GPU jobs run on this host: `device: cuda` without a GPU is an error."""
    if (gpu_count() if gpus is None else gpus) == 0:
        raise ConfigError("device: cuda, but no GPU is visible on this host (CUDA reports 0 devices); "
                          "use device: auto or cpu, or run on a GPU host")


def sweep_shapes(config: dict, workload: str) -> list[Shape]:
    """The workload's sweep (gemm: the square sizes; b2b: every combination of its axes' sizes)."""
    return [Shape.of(workload, sizes) for sizes in workloads.get(workload).sweep(config)]


def validation_shapes(config: dict, workload: str) -> list[Shape]:
    sweep = sweep_shapes(config, workload)
    in_sweep = {s.dims for s in sweep}
    awkward = [Shape.of(workload, sizes, "awkward") for sizes in workloads.get(workload).listed(config)]
    return sweep + [s for s in awkward if s.dims not in in_sweep]


def variants(config: dict, device: str) -> list[registry.Variant]:
    """The variants to run: chosen families, optional allow-list, and only CPU variants without a GPU."""
    known = registry.load(config["variant_modules"])
    unregistered = [name for name in config["workloads"] if name not in workloads.WORKLOADS]
    if unregistered:
        raise ConfigError(f"workloads: {unregistered} not registered ({sorted(workloads.WORKLOADS)}; a module named "
                          f"in variant_modules may register one)")
    unknown = [key for key in config["variants"] if key not in known]
    if unknown:
        raise ConfigError(f"variants: unknown {unknown}; registered variants are {sorted(known)}")
    elsewhere = [key for key in config["variants"] if known[key].workload not in config["workloads"]]
    if elsewhere:
        raise ConfigError(f"variants: {elsewhere} compute a workload not in workloads: {config['workloads']}")
    families = {v.family for v in known.values()}
    absent = [family for family in config["families"] if family not in families]
    if absent:
        raise ConfigError(f"families: {absent} registered no variant; registered families are {sorted(families)} "
                          f"(a module of your own registers more: variant_modules)")
    chosen = [v for v in known.values() if v.workload in config["workloads"] and v.family in config["families"]
              and (not config["variants"] or v.key in config["variants"])]
    for family in config["families"]:
        if not any(v.family == family for v in chosen):
            log.warning("family %r has no registered variant of %s (selected by the config): nothing to run for it",
                        family, " or ".join(config["workloads"]))
    untuned = [v.key for v in chosen if v.tuner and device == "cuda" and not tuned(config, v)]
    if untuned and config["variants"]:
        raise ConfigError(f"variants: {untuned} run only as tuned on this GPU model, and none of its tuning is "
                          f"committed (resources/tuning/); set tune.autotuner.trials (e.g. 1024) with "
                          f"tune.enabled: true")
    if untuned:
        log.warning("%s not run: no tuning committed for this GPU model; they are tuned on it first "
                    "(tune.autotuner.trials, now 0; e.g. 1024)", untuned)
        chosen = [v for v in chosen if v.key not in untuned]
    dropped = sorted({v.family for v in chosen if v.device != "cpu"}) if device == "cpu" else []
    if dropped:
        log.warning("device cpu: the GPU families %s are not run", dropped)
    chosen = [v for v in chosen if device == "cuda" or v.device == "cpu"]
    for section in ("params", "max_size"):
        for key in config[section]:
            if key not in known and key not in families:
                raise ConfigError(f"{section}: {key!r} is not a registered variant ({sorted(known)})")
    return chosen


REFERENCES = ROOT / "resources" / "references.yaml"


def reference(config: dict, device: str, gpu: str) -> str:
    """The summary the report compares this run with: the configured one, or with compare_with: auto the committed
    example of this GPU model (REFERENCES), where there is one; "" for none."""
    if config["compare_with"] != "auto":
        return config["compare_with"]
    import yaml

    path = (yaml.safe_load(REFERENCES.read_text()) or {}).get(gpu) if device == "cuda" and REFERENCES.exists() else None
    return str(ROOT / path) if path and (ROOT / path).exists() else ""


def gpu_slug(name: str) -> str:
    """A GPU model's name as a path component (tuning records are per model)."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "unknown-gpu"


def gpu_model(config: dict) -> str:
    """The GPU model the run tunes for, as a path component: the config's tune.gpu, else GPU 0's name."""
    if config["tune"]["gpu"]:
        return gpu_slug(config["tune"]["gpu"])
    try:
        import cupy
        return gpu_slug(cupy.cuda.runtime.getDeviceProperties(0)["name"].decode())
    except Exception:  # a submit host without a GPU: results land under "unknown-gpu" unless tune.gpu names it
        return "unknown-gpu"


def tuned(config: dict, variant: registry.Variant, gpu: str | None = None) -> bool:
    """Whether the tune stage chooses this variant's parameters (explicit params in the config win). A variant with
    a search of its own is tuned with a trial budget (tune.autotuner.trials) or, without one, where a result
    committed for this GPU model (`gpu`; default GPU 0's) stands for its current sources."""
    if not config["tune"]["enabled"] or variant.key in config["params"]:
        return False
    if variant.space or (variant.tuner and config["tune"]["autotuner"]["trials"] > 0):
        return True

    from gemmbench.tuning import records

    model = gpu or gpu_model(config)
    return bool(variant.tuner) and any(
        records.committed(config["tune"], variant, mode, model)[1]
        or (config["tune"]["transfer"]
            and records.transferred(config["tune"], variant, mode, model, records.host_gpu()))
        for mode in modes(config, variant))


def params(config: dict, variant: registry.Variant) -> dict:
    overrides = config["params"].get(variant.key, {})
    unknown = set(overrides) - set(variant.params)
    if unknown:
        raise ConfigError(f"params.{variant.key}: unknown parameters {sorted(unknown)}; "
                          f"it takes {sorted(variant.params)}")
    return {**variant.params, **overrides}


def modes(config: dict, variant: registry.Variant) -> list[str]:
    return [m for m in config["modes"] if m in variant.modes]


def skip_reason(config: dict, variant: registry.Variant, shape: Shape) -> str | None:
    """Why this point is not run at all (declared by the variant or capped by the config), or None."""
    name = variant.key if variant.key in config["max_size"] else variant.family
    cap = config["max_size"].get(name)
    if cap and max(shape.sizes.values()) > cap:
        return f"above the configured size cap for {name} (max_size {cap})"
    return variant.unsupported(*shape.sizes.values(), params(config, variant))


def summary(config: dict, variants: list[registry.Variant], device: str, gpu: str) -> str:
    """What a run of this plan measures, in one line: the variants, modes and points of each workload (the tuning's
    part: tuning/search.plan_line)."""
    parts = []
    for workload in config["workloads"]:
        runs = [(v, mode) for v in variants if v.workload == workload for mode in modes(config, v)]
        if not runs:
            continue
        timed = {shape.dims for shape in sweep_shapes(config, workload)}
        shapes = validation_shapes(config, workload)
        planned = [(v, shape) for v, _ in runs for shape in shapes if not skip_reason(config, v, shape)]
        parts.append(f"{workload}: {len(runs)} variant-modes, {sum(s.dims in timed for _, s in planned)} points to "
                     f"time and {len(planned)} to validate")
    return f"the plan on {device}: " + "; ".join(parts)

"""The experiment plan: which (variant, mode, shape) points exist, derived from a validated config."""
from __future__ import annotations

import logging
from dataclasses import dataclass

from kernels import registry
from gemmbench.config import ConfigError

log = logging.getLogger("gemmbench")


@dataclass(frozen=True)
class Shape:
    m: int
    n: int
    k: int
    kind: str = "sweep"  # "sweep" (validated and benchmarked) or "awkward" (validated only)

    @property
    def label(self) -> str:
        return f"{self.m}x{self.n}x{self.k}"

    @classmethod
    def parse(cls, label: str, kind: str = "sweep") -> "Shape":
        m, n, k = (int(x) for x in label.split("x"))
        return cls(m, n, k, kind)


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
    return "cpu", "no GPU visible on this host: ran the CPU families only"


def require_gpu(gpus: int | None = None) -> None:
    """Before GPU jobs run on this host: `device: cuda` without a GPU is an error."""
    if (gpu_count() if gpus is None else gpus) == 0:
        raise ConfigError("device: cuda, but no GPU is visible on this host (CUDA reports 0 devices); "
                          "use device: auto or cpu, or run on a GPU host")


def sweep_shapes(config: dict) -> list[Shape]:
    return [Shape(n, n, n) for n in config["sizes"]]


def validation_shapes(config: dict) -> list[Shape]:
    awkward = [Shape(m, n, k, "awkward") for m, n, k in config["validation_shapes"]]
    sweep = sweep_shapes(config)
    in_sweep = {(s.m, s.n, s.k) for s in sweep}
    return sweep + [s for s in awkward if (s.m, s.n, s.k) not in in_sweep]


def variants(config: dict, device: str) -> list[registry.Variant]:
    """The variants to run: chosen families, optional allow-list, and only CPU variants without a GPU."""
    known = registry.load(config["variant_modules"])
    unknown = [key for key in config["variants"] if key not in known]
    if unknown:
        raise ConfigError(f"variants: unknown {unknown}; registered variants are {sorted(known)}")
    chosen = [v for v in known.values()
              if v.family in config["families"] and (not config["variants"] or v.key in config["variants"])]
    for family in config["families"]:
        if not any(v.family == family for v in chosen):
            log.warning("family %r has no registered variant (selected by the config): nothing to run for it", family)
    dropped = sorted({v.family for v in chosen if v.device != "cpu"}) if device == "cpu" else []
    if dropped:
        log.warning("device cpu: the GPU families %s are not run", dropped)
    chosen = [v for v in chosen if device == "cuda" or v.device == "cpu"]
    for section in ("params", "max_size"):
        for key in config[section]:
            if key not in known and key not in registry.FAMILIES:
                raise ConfigError(f"{section}: {key!r} is not a registered variant ({sorted(known)})")
    return chosen


def gpu_slug(config: dict) -> str:
    """The GPU model as a path component (tuning results are per model): the config's tune.gpu, else GPU 0's name."""
    from gemmbench.tune import gpu_slug as slug

    if config["tune"]["gpu"]:
        return slug(config["tune"]["gpu"])
    try:
        import cupy
        return slug(cupy.cuda.runtime.getDeviceProperties(0)["name"].decode())
    except Exception:  # a submit host without a GPU: results land under "unknown-gpu" unless tune.gpu names it
        return "unknown-gpu"


def tuned(config: dict, variant: registry.Variant) -> bool:
    """Whether the tune stage chooses this variant's parameters (explicit params in the config win)."""
    return bool(config["tune"]["enabled"] and variant.space and variant.key not in config["params"])


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
    if cap and max(shape.m, shape.n, shape.k) > cap:
        return f"above the configured size cap for {name} (max_size {cap})"
    return variant.unsupported(shape.m, shape.n, shape.k, params(config, variant))

"""The one Variant interface and the registry of every variant.

A variant is one way of computing C = A @ B (row-major, float32 storage). The harness owns
allocation, input generation, timing and checking; a variant only builds and runs.
Importing this module is cheap: families import their heavy libraries inside `build`.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

MODES = ("fp32", "tf32")
FAMILIES = ("cublas", "cupy", "numba", "tvm", "cpu")


@dataclass
class Built:
    """What `build` returns: the runnable artifact plus facts about the build."""

    artifact: Any
    facts: dict = field(default_factory=dict)  # compile_s, registers, shared_bytes, local_bytes, ...


@dataclass(frozen=True)
class Variant:
    """One registered implementation.

    build(mode, params, cache_dir) -> Built     compile/prepare (cache_dir may hold artifacts)
    run(artifact, a, b, c) -> None              compute c = a @ b on the current stream, no sync
    unsupported(m, n, k, params) -> str | None  why a shape cannot run, or None
    space: {param: candidate values}            what the tune stage may search (empty: nothing to tune)
    check_params(params) -> str | None          why a parameter set cannot compile or run (the tuner skips it)
    source_files                                files whose edits must rebuild the variant (default: build's module)
    """

    family: str
    name: str
    device: str  # "cuda" or "cpu"
    modes: tuple[str, ...]
    build: Callable[[str, Mapping, Any], Built]
    run: Callable[[Any, Any, Any, Any], None]
    params: Mapping[str, Any] = field(default_factory=dict)
    unsupported: Callable[[int, int, int, Mapping], str | None] = lambda m, n, k, params: None
    space: Mapping[str, tuple] = field(default_factory=dict)
    check_params: Callable[[Mapping], str | None] = lambda params: None
    source_files: tuple[str, ...] = ()
    description: str = ""

    @property
    def key(self) -> str:
        return f"{self.family}/{self.name}"


_REGISTRY: dict[str, Variant] = {}
BUILTIN_MODULES = ("kernels.cublas.gemm", "kernels.cupy.ladder", "kernels.numba.ladder", "kernels.cpu.numpy_blas",
                   "kernels.cpu.numba_tiled")


def register(variant: Variant) -> Variant:
    if variant.family not in FAMILIES:
        raise ValueError(f"variant {variant.name!r}: unknown family {variant.family!r} (one of {FAMILIES})")
    unknown = set(variant.modes) - set(MODES)
    if unknown:
        raise ValueError(f"variant {variant.key}: unknown modes {sorted(unknown)} (one of {MODES})")
    _REGISTRY[variant.key] = variant
    return variant


def load(extra_modules: tuple[str, ...] | list[str] = ()) -> dict[str, Variant]:
    """Every registered variant, keyed 'family/name'. Extra modules register more (e.g. tests' planted kernels)."""
    for module in (*BUILTIN_MODULES, *extra_modules):
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise ImportError(f"variant module {module!r} cannot be imported: {exc}") from exc
    return dict(_REGISTRY)

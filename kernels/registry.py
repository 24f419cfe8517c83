"""The one Variant interface and the registry of every variant.

A variant is one way of computing a workload (row-major; operands stored as its mode says, OPERAND_DTYPE; the
output float32): gemm, C = A @ B, or b2b,
D = (A0 @ B0) @ B1 (gemmbench/workloads/). The harness owns allocation, input generation, timing and checking;
a variant only builds and runs.
Importing this module is cheap: families import their heavy libraries inside `build`.
"""
from __future__ import annotations

import importlib
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

MODES = ("fp32", "tf32", "bf16")
# How a mode's operands are stored (the output is float32 and accumulation FP32 in every mode): bf16 operands are
# uint16 arrays of bfloat16 bit patterns, rounded to nearest even from the float32 inputs (CuPy has no bfloat16 dtype).
OPERAND_DTYPE = {"fp32": "float32", "tf32": "float32", "bf16": "uint16"}
FAMILY_NAME = re.compile(r"[a-z][a-z0-9]*")  # a family is any name a module registers variants under


# What each family compiles with (provenance.toolchain's names): what its tuning results are keyed on.
NVRTC = ("cupy-cuda13x", "cupy-cuda12x", "nvrtc")  # CuPy's RawModule and compile_using_nvrtc
NUMBA = ("numba", "numba-cuda", "nvvm")  # numba-cuda compiles through NVVM (the nvidia-nvvm wheel or the toolkit's)
TVM = ("apache-tvm", "apache-tvm-ffi", *NVRTC)  # TVM writes the CUDA source, NVRTC compiles it


@dataclass
class Built:
    """What `build` returns: the runnable artifact plus facts about the build."""

    artifact: Any
    facts: dict = field(default_factory=dict)  # compile_s, registers, shared_bytes, local_bytes, ...
    # facts that take seconds to read (a disassembly, a second compile to read the PTX): read only where a build
    # record asks for them (all_facts), not in the measure jobs, which load the kernel and launch it
    costly_facts: Callable[[], dict] | None = None

    def all_facts(self) -> dict:
        if self.costly_facts:
            self.facts.update(self.costly_facts())
            self.costly_facts = None
        return self.facts


@dataclass(frozen=True)
class Variant:
    """One registered implementation.

    build(mode, params, cache_dir) -> Built     compile/prepare; cache_dir (shared by every job and process of a run)
                                                may keep compiled artifacts under keys of all that determines them
    run(artifact, *operands, out, stream)       compute out, queued on `stream` (the harness's: a cupy.cuda.Stream;
                                                None on a CPU), no sync (gemm: a, b, c, stream)
    unsupported(*sizes, params) -> str | None   why a shape (its workload's axes in order) cannot run, or None
    space: {param: candidate values}            what the tune stage may search (empty: nothing to tune)
    check_params(params) -> str | None          why a parameter set cannot compile or run (the tuner skips it)
    tuner(mode, shape, trials, work_dir, committed, seed, log, measure) -> dict
                                                a variant's own search (instead of `space`), run by the tune stage per
                                                size class until work_dir's records stand for `trials`; returns
                                                {params, median_s, tflops, trials, records}; `committed` (such a
                                                result) seeds an empty work_dir; measure(param_sets) -> rows: the
                                                harness builds, validates and times candidates ({status, median_s,
                                                message} each), so a search proposes and never times
    source_files                                files whose edits must rebuild the variant (default: build's module)
    compilers                                   the toolchain entries (provenance.toolchain's names) that turn its
                                                source into machine code; its tuning is keyed on these (empty: all)
    generated(mode, params) -> dict             what the compiler makes of a parameter set (digests, launch settings),
                                                with no GPU: a tuning record migrates while its winners' is the same
    prepare(artifact, *sizes) -> None           for variants whose kernels are specialised per shape: compile (not
                                                run) the one for this shape now, so that the build stage does it
                                                for every planned shape while another job holds the GPU
    """

    family: str
    name: str
    device: str  # "cuda" or "cpu"
    modes: tuple[str, ...]
    build: Callable[[str, Mapping, Any], Built]
    run: Callable[..., None]
    params: Mapping[str, Any] = field(default_factory=dict)
    unsupported: Callable[..., str | None] = lambda *sizes_and_params: None
    space: Mapping[str, tuple] = field(default_factory=dict)
    check_params: Callable[[Mapping], str | None] = lambda params: None
    tuner: Callable[..., dict] | None = None
    source_files: tuple[str, ...] = ()
    compilers: tuple[str, ...] = ()
    prepare: Callable[..., None] | None = None
    generated: Callable[[str, Mapping], dict] | None = None
    description: str = ""
    workload: str = "gemm"
    # "baseline": what every other variant of its workload and mode is compared with (cuBLAS); "unfused": a
    # reference that computes a fused workload in several calls (b2b); "": a variant measured against them
    role: str = ""

    @property
    def key(self) -> str:
        return f"{self.family}/{self.name}"


_REGISTRY: dict[str, Variant] = {}
_ORIGIN: dict[str, str] = {}  # variant key -> the module that registered it
KERNELS = Path(__file__).parent


def families() -> tuple[str, ...]:
    """The built-in families' packages: every folder of kernels/ that is one. A package registers its variants when
    imported (its __init__ imports its declarations), so a new family is its folder and a new rung its file and
    declaration."""
    return tuple(f"kernels.{d.name}" for d in sorted(KERNELS.iterdir()) if (d / "__init__.py").exists())


ROLES = ("", "baseline", "unfused")


def register(variant: Variant, origin: str | None = None) -> Variant:
    """Add a variant; `origin` is the module that declares it (default: the caller's)."""
    if not FAMILY_NAME.fullmatch(variant.family):
        raise ValueError(f"variant {variant.name!r}: family {variant.family!r} is not a lower-case name "
                         f"({FAMILY_NAME.pattern}); it names folders, wildcards and table rows")
    if variant.role not in ROLES:
        raise ValueError(f"variant {variant.key}: unknown role {variant.role!r} (one of {ROLES})")
    if not FAMILY_NAME.fullmatch(variant.workload):
        raise ValueError(f"variant {variant.key}: workload {variant.workload!r} is not a lower-case name")
    unknown = set(variant.modes) - set(MODES)
    if unknown:
        raise ValueError(f"variant {variant.key}: unknown modes {sorted(unknown)} (one of {MODES})")
    _REGISTRY[variant.key] = variant
    _ORIGIN[variant.key] = origin or sys._getframe(1).f_globals.get("__name__", "")  # the module that declares it
    return variant


def declared() -> set[str]:
    """The keys of the variants registered so far."""
    return set(_ORIGIN)


def origin(key: str) -> str:
    """The module whose code registered the variant (its declaration: launch shape, checks, defaults)."""
    return _ORIGIN[key]


def registered(key: str) -> Variant:
    """A variant registered already (by a module imported before the caller), e.g. to compose another from it."""
    return _REGISTRY[key]


def load(extra_modules: tuple[str, ...] | list[str] = ()) -> dict[str, Variant]:
    """The variants that the built-in families and `extra_modules` (e.g. tests' planted kernels), or their
    submodules, register, keyed 'family/name'; one registered by a module imported for another reason (another
    test's) is not among them."""
    modules = (*families(), *extra_modules)
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise ImportError(f"variant module {module!r} cannot be imported: {exc}") from exc
    return {key: variant for key, variant in _REGISTRY.items()
            if any(_ORIGIN[key] == module or _ORIGIN[key].startswith(f"{module}.") for module in modules)}

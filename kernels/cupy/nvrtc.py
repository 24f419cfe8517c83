"""How a CuPy raw-CUDA rung is declared, compiled with NVRTC and launched: one way for every rung of the family,
whatever its hardware (SIMT, mma.sync, wgmma, TMA).

A rung is one CUDA file and its `Rung(...)` declaration in the `variants.py` beside it (kernels/cupy/variants.py for the
FP32 ladder, kernels/cupy/tensorcore/variants.py for the tensor-core ladder): its kernel per mode, a template over its
tile parameters, whose instantiation a parameter set asks for (RawModule name expressions). Rungs that read 16-byte
vectors also get a VEC=false instance for rows that are not 16-byte aligned, so every rung runs every shape. A rung
whose launch needs more than a grid (TMA's tensor maps) names a `Launcher`.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from kernels import machine_code
from kernels.registry import NVRTC, Built, Variant, register
from kernels.tiles import block_threads, cdiv

HERE = Path(__file__).parent  # every rung's include path: common.cuh, mbarrier.cuh and the FP32 rungs
INT32_ELEMENTS = 2**31  # kernels index with int
SM90A = "-arch=sm_90a"  # the NVRTC option of the rungs that issue wgmma or setmaxnreg (CuPy's -arch=sm_90 lacks them)


@dataclass(frozen=True)
class Launcher:
    """How a rung is built and launched when a grid is not enough (tensorcore/tma.py: tensor maps encoded on the
    host): `build(rung, mode, compiled)` wraps what NVRTC compiled, `run(artifact, a, b, c, stream)` launches it,
    `programs(rung, mode)` names the other instantiations of the rung's file that it compiles (for the code digest)."""

    build: Callable[["Rung", str, "Compiled"], Any]
    run: Callable[..., None]
    programs: Callable[["Rung", str], tuple[tuple[str, ...], ...]] = lambda rung, mode: ()


@dataclass(frozen=True)
class Rung:
    """What the harness needs to know about one CUDA file: how to instantiate and launch its kernel."""

    file: str
    kernel: str | Mapping[str, str]  # its kernel template, or one per mode: {"tf32": ..., "bf16": ...}
    template: tuple[str, ...]  # template parameters in order (a trailing VEC flag is added when `vec`)
    defaults: Mapping[str, int]
    space: Mapping[str, tuple[int, ...]]  # what the tune stage searches
    threads: Callable[[Mapping], int]
    tile: Callable[[Mapping], tuple[int, int]]  # (rows, cols) of C per block
    check: Callable[[Mapping], str | None] = lambda p: None  # why a parameter set cannot compile or run
    vec: bool = False
    grid_1d: bool = False  # blocks numbered 0..tiles-1 (the kernel maps them to tiles itself)
    rows_first: bool = False  # grid.x runs over rows of C (rung 1: that is what makes it uncoalesced)
    threads_2d: Callable[[Mapping], tuple[int, int]] | None = None  # 2-D thread blocks (x, y)
    dynamic_smem: Callable[[Mapping], int] = lambda p: 0
    options: tuple[str, ...] = ()  # NVRTC options of its own (SM90A for wgmma)
    description: str = ""
    folder: Path = HERE  # where its file is
    persistent: bool = False  # one block per SM, looping over tiles (the Launcher sizes the grid)
    launcher: Launcher | None = None

    @property
    def name(self) -> str:
        return Path(self.file).stem

    @property
    def kernels(self) -> dict[str, str]:
        """Its kernel template per mode (a plain name: the FP32 ladder's)."""
        return {"fp32": self.kernel} if isinstance(self.kernel, str) else dict(self.kernel)

    def expression(self, params: Mapping, vec: bool | None = None, mode: str = "fp32") -> str:
        args = [str(int(params[t])) for t in self.template] + ([] if vec is None else ["true" if vec else "false"])
        return f"{self.kernels[mode]}<{', '.join(args)}>"

    def compile_options(self) -> tuple[str, ...]:
        return ("-std=c++17", f"-I{self.folder}", f"-I{HERE}", *self.options)

    def launch(self, params: Mapping, m: int, n: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
        rows, cols = self.tile(params)
        block = self.threads_2d(params) if self.threads_2d else (self.threads(params),)
        if self.grid_1d:
            return (cdiv(m, rows) * cdiv(n, cols),), block
        if self.rows_first:
            return (cdiv(m, rows), cdiv(n, cols)), block
        return (cdiv(n, cols), cdiv(m, rows)), block

    def problems(self, params: Mapping, max_smem: int = 227 * 1024) -> str | None:
        bad = block_threads(self.threads(params))
        if bad:
            return bad
        if self.dynamic_smem(params) > max_smem:
            return f"{self.dynamic_smem(params)} bytes of shared memory (the device allows {max_smem})"
        return self.check(params)


@dataclass
class Compiled:
    rung: Rung
    mode: str
    params: dict
    kernels: dict = field(default_factory=dict)  # vec flag (or None) -> cupy RawKernel
    smem: int = 0


def module(rung: Rung, names: list[str]):
    """NVRTC's module of the rung's file with the instantiations `names`."""
    import cupy

    return cupy.RawModule(code=(rung.folder / rung.file).read_text(), options=rung.compile_options(),
                          name_expressions=names)


def compute_capability() -> str:
    import cupy

    return cupy.cuda.Device().compute_capability


def _compile(rung: Rung, mode: str, params: Mapping) -> tuple[Compiled, dict]:
    import cupy

    capability = compute_capability() if SM90A in rung.options else None
    if capability not in (None, "90"):
        raise ValueError(f"{rung.name} is built for sm_90a (wgmma, TMA, setmaxnreg), which only sm_90 GPUs run "
                         f"(this one is sm_{capability})")
    problem = rung.problems(params, cupy.cuda.Device().attributes["MaxSharedMemoryPerBlockOptin"])
    if problem:
        raise ValueError(f"{rung.name} cannot use {dict(params)}: {problem}")
    flags = (True, False) if rung.vec else (None,)
    names = {flag: rung.expression(params, flag, mode) for flag in flags}
    built = module(rung, list(names.values()))
    compiled = Compiled(rung, mode, dict(params), smem=rung.dynamic_smem(params))
    facts = {}
    for flag, name in names.items():
        kernel = built.get_function(name)
        if compiled.smem > 48 * 1024:
            kernel.max_dynamic_shared_size_bytes = compiled.smem
        compiled.kernels[flag] = kernel
        suffix = "" if flag in (None, True) else "_unaligned"
        facts.update({f"registers{suffix}": kernel.num_regs, f"local_bytes{suffix}": kernel.local_size_bytes,
                      f"shared_bytes{suffix}": kernel.shared_size_bytes + compiled.smem})
    facts.update(kernel=names[flags[0]], threads=rung.threads(params))
    return compiled, facts


def _run(compiled: Compiled, a, b, c, stream) -> None:
    import numpy as np

    m, k = a.shape
    n = b.shape[1]
    rung, params = compiled.rung, compiled.params
    flag = None
    if rung.vec:  # 16-byte copies need 16-byte aligned row starts (4 floats, 8 bfloat16)
        per_chunk = 16 // a.itemsize
        flag = k % per_chunk == 0 and n % per_chunk == 0 and all(x.data.ptr % 16 == 0 for x in (a, b, c))
    grid, block = rung.launch(params, m, n)
    compiled.kernels[flag](grid, block, (np.int32(m), np.int32(n), np.int32(k), a, b, c), shared_mem=compiled.smem,
                             stream=stream)


def code(rung: Rung, mode: str, params: Mapping) -> dict:
    """What NVRTC makes of the rung's instantiations for `params` in `mode` (and of its launcher's other programs),
    and how they are launched: a tuning trial's identity (kernels/machine_code.py)."""
    flags = (True, False) if rung.vec else (None,)
    programs = ((*(rung.expression(params, flag, mode) for flag in flags),),
                *(rung.launcher.programs(rung, mode) if rung.launcher else ()))
    options = ("-std=c++17", *rung.options) if rung.options else ("-std=c++17", machine_code.ARCH)
    codes = [machine_code.machine_code(rung.folder / rung.file, list(names), options) for names in programs]
    return {"compiler": machine_code.nvrtc_version(), "cubin": machine_code.digest(codes),
            "launch": {"shapes": [rung.launch(params, m, n) for m, n in machine_code.PROBE_SHAPES],
                       "dynamic_smem": rung.dynamic_smem(params), "persistent": rung.persistent}}


def _unsupported(m, n, k, params) -> str | None:
    if max(m * k, k * n, m * n) >= INT32_ELEMENTS:
        return "a matrix with 2^31 or more elements (the kernels index with 32-bit int)"
    return None


def variant(rung: Rung) -> Variant:
    """A rung as a variant of the cupy family, in each of its modes (BF16 operands arrive as uint16 arrays,
    registry.OPERAND_DTYPE): each mode's kernel compiled with NVRTC from its own instantiation, launched by
    `Rung.launch` or its Launcher. A rung built for sm_90a is refused on other GPUs, whose driver could
    not load it."""
    def build(mode, params, cache_dir):
        compiled, facts = _compile(rung, mode, params)
        return Built(rung.launcher.build(rung, mode, compiled) if rung.launcher else compiled, facts)

    return Variant(family="cupy", name=rung.name, device="cuda", modes=tuple(rung.kernels), build=build,
                   run=rung.launcher.run if rung.launcher else _run, params=dict(rung.defaults),
                   space=dict(rung.space), check_params=rung.problems, unsupported=_unsupported,
                   source_files=(str(rung.folder / rung.file),
                                 *map(str, machine_code.included(rung.folder / rung.file))),
                   compilers=NVRTC, description=rung.description,
                   generated=lambda mode, params: code(rung, mode, params))


def declare(*rungs: Rung) -> tuple[Rung, ...]:
    """Register each rung as a variant (a folder's variants.py declares its ladder with this), in the order given."""
    declaring = sys._getframe(1).f_globals["__name__"]
    for rung in rungs:
        register(variant(rung), origin=declaring)
    return rungs

"""The CuPy raw-CUDA ladder: one CUDA source per rung (01_naive.cu … 13_split_barriers.cu), each a variant.

Each rung's kernel is a template over its tile parameters; CuPy compiles the instantiation a parameter set
asks for (RawModule name expressions) with NVRTC. Rungs that read float4s also get a VEC=false instance for
rows that are not 16-byte aligned (K or N not a multiple of 4), so every rung runs every shape.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

from kernels import generated
from kernels.registry import NVRTC, Built, Variant, register
from kernels.tiles import accumulators, block_threads, cdiv, divides, static_smem, warp_threads, warp_tiles

HERE = Path(__file__).parent
INT32_ELEMENTS = 2**31  # kernels index with int


@dataclass(frozen=True)
class Rung:
    """What the harness needs to know about one CUDA file: how to instantiate and launch its kernel."""

    file: str
    kernel: str
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
    options: tuple[str, ...] = ()  # NVRTC options of its own (-arch=sm_90a for wgmma: CuPy's -arch=sm_90 lacks it)
    description: str = ""

    @property
    def name(self) -> str:
        return Path(self.file).stem

    def expression(self, params: Mapping, vec: bool | None = None) -> str:
        args = [str(int(params[t])) for t in self.template] + ([] if vec is None else ["true" if vec else "false"])
        return f"{self.kernel}<{', '.join(args)}>"

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


def _float4_check(p) -> str | None:
    return "TM, TN and BK must be multiples of 4 (float4 reads)" if p["TM"] % 4 or p["TN"] % 4 or p["BK"] % 4 else None


def _blocktile_check(p) -> str | None:
    return (divides(p, ("TM", "BM"), ("TN", "BN"))
            or static_smem(p["BK"] * (p["BM"] + p["BN"]))
            or accumulators(p["TM"] * p["TN"]))


def _vector_check(p) -> str | None:
    return _float4_check(p) or _blocktile_check(p)


def _warptile_check(p) -> str | None:
    return warp_tiles(p) or _float4_check(p)


def _pipelined_smem(p) -> int:
    return p["STAGES"] * (p["BM"] * (p["BK"] + 4) + p["BK"] * p["BN"]) * 4


def _pipelined_check(p) -> str | None:
    if p["BK"] % 8:
        return "BK must be a multiple of 8 (conflict-free A reads need (BK + 4)/4 odd)"
    return _warptile_check(p)


def _transposed_copy_check(p) -> str | None:
    if warp_threads(p) % p["BK"]:
        return "the threads of a block must copy whole rows of BK elements of A"
    return _warptile_check(p)


def _transposed_smem(p) -> int:
    return p["STAGES"] * p["BK"] * (p["BM"] + 4 + p["BN"]) * 4


def _split_barriers_smem(p) -> int:
    return _transposed_smem(p) + 2 * p["STAGES"] * 8  # and a full and an empty mbarrier per stage


def _swizzled_check(p) -> str | None:
    return (None if p["BK"] in (4, 8, 16, 32) else "the swizzle needs BK in 4, 8, 16, 32") or _vector_check(p)


_SQUARE = dict(threads=lambda p: p["TILE"] ** 2, threads_2d=lambda p: (p["TILE"], p["TILE"]),
               check=lambda p: None if p["TILE"] in (8, 16, 32) else "TILE must be 8, 16 or 32")
_BLOCK2D = dict(template=("BM", "BN", "BK", "TM", "TN"), threads=lambda p: (p["BM"] // p["TM"]) * (p["BN"] // p["TN"]),
                tile=lambda p: (p["BM"], p["BN"]))
_BLOCK2D_SPACE = {"BM": (64, 128), "BN": (64, 128), "BK": (8, 16, 32), "TM": (4, 8), "TN": (4, 8)}
_WARP = ("BM", "BN", "BK", "WM", "WN", "WMITER", "WNITER", "TM", "TN")
_WARP_SPACE = {"BM": (64, 128, 256), "BN": (64, 128, 256), "BK": (8, 16), "WM": (32, 64, 128), "WN": (32, 64),
               "WMITER": (1, 2, 4), "WNITER": (1, 2), "TM": (4, 8), "TN": (4, 8)}

_PIPELINED_TEMPLATE = (*_WARP, "STAGES", "GROUP", "MIN_BLOCKS")
_PIPELINED_SPACE = {"BM": (64, 128, 256), "BN": (64, 128, 256), "BK": (8, 16, 32), "WM": (32, 64), "WN": (32, 64),
                    "WMITER": (1, 2), "WNITER": (1, 2), "TM": (4, 8), "TN": (4, 8), "STAGES": (2, 3, 4),
                    "GROUP": (8, 16), "MIN_BLOCKS": (1, 2)}
_PIPELINED = dict(threads=warp_threads, tile=lambda p: (p["BM"], p["BN"]), check=_pipelined_check, vec=True,
                  grid_1d=True, dynamic_smem=_pipelined_smem)

RUNGS = (
    Rung("01_naive.cu", "sgemm_naive", ("BX", "BY"), {"BX": 32, "BY": 32}, {"BX": (16, 32), "BY": (8, 32)},
         threads=lambda p: p["BX"] * p["BY"], threads_2d=lambda p: (p["BX"], p["BY"]),
         tile=lambda p: (p["BX"], p["BY"]), rows_first=True,
         description="one thread per output; threadIdx.x runs down a column (uncoalesced)"),
    Rung("02_coalesced.cu", "sgemm_coalesced", ("BX", "BY"), {"BX": 32, "BY": 32},
         {"BX": (32, 64), "BY": (4, 8, 16, 32)},
         threads=lambda p: p["BX"] * p["BY"], threads_2d=lambda p: (p["BX"], p["BY"]),
         tile=lambda p: (p["BY"], p["BX"]),
         description="one thread per output; threadIdx.x runs along a row (coalesced)"),
    Rung("03_smem_tiles.cu", "sgemm_smem_tiles", ("TILE",), {"TILE": 32}, {"TILE": (16, 32)},
         tile=lambda p: (p["TILE"], p["TILE"]), **_SQUARE,
         description="TILE×TILE shared-memory tiles of A and B, one output per thread"),
    Rung("04_rect_tiles.cu", "sgemm_rect_tiles", ("TILE",), {"TILE": 32}, {"TILE": (16, 32)},
         tile=lambda p: (p["TILE"], 2 * p["TILE"]), **_SQUARE,
         description="two outputs per thread from one A tile and two B tiles"),
    Rung("05_blocktile_1d.cu", "sgemm_blocktile_1d", ("BM", "BN", "BK", "TM"), {"BM": 64, "BN": 64, "BK": 8, "TM": 8},
         {"BM": (64, 128), "BN": (64, 128), "BK": (8, 16), "TM": (4, 8, 16)},
         threads=lambda p: p["BM"] * p["BN"] // p["TM"], tile=lambda p: (p["BM"], p["BN"]),
         check=lambda p: divides(p, ("TM", "BM")) or static_smem(p["BK"] * (p["BM"] + p["BN"])),
         description="TM outputs per thread along a column of C"),
    Rung("06_blocktile_2d.cu", "sgemm_blocktile_2d", defaults={"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8},
         space=_BLOCK2D_SPACE, check=_blocktile_check, **_BLOCK2D,
         description="TM×TN register tile per thread (outer products)"),
    Rung("07_vectorized.cu", "sgemm_vectorized", defaults={"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8},
         space=_BLOCK2D_SPACE, check=_vector_check, vec=True, **_BLOCK2D,
         description="float4 global and shared loads, A transposed in shared memory"),
    Rung("08_bank_conflicts.cu", "sgemm_bank_conflicts", defaults={"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8},
         space=_BLOCK2D_SPACE, check=_swizzled_check, vec=True, **_BLOCK2D,
         description="rung 7 with the transposed A tile swizzled: no bank conflicts"),
    Rung("09_warptile.cu", "sgemm_warptile", _WARP,
         {"BM": 128, "BN": 128, "BK": 8, "WM": 64, "WN": 32, "WMITER": 2, "WNITER": 2, "TM": 4, "TN": 4},
         _WARP_SPACE, threads=warp_threads, tile=lambda p: (p["BM"], p["BN"]),
         check=lambda p: _warptile_check(p) or _swizzled_check(p), vec=True,
         description="block → warp → thread tiles"),
    Rung("10_pipelined.cu", "sgemm_pipelined", _PIPELINED_TEMPLATE,
         {"BM": 64, "BN": 128, "BK": 16, "WM": 32, "WN": 64, "WMITER": 1, "WNITER": 2, "TM": 8, "TN": 4,
          "STAGES": 4, "GROUP": 16, "MIN_BLOCKS": 2}, _PIPELINED_SPACE, **_PIPELINED,
         description="cp.async multi-stage pipeline, row-major A with interleaved rows, grouped block order"),
    # cuBLAS's FP32 kernel on Hopper as its defaults: 256×128×8, 8 warps of 64×64, 8×16 per thread, 3 stages, 1 block
    Rung("11_double_buffered.cu", "sgemm_double_buffered", _PIPELINED_TEMPLATE,
         {"BM": 256, "BN": 128, "BK": 8, "WM": 64, "WN": 64, "WMITER": 1, "WNITER": 2, "TM": 8, "TN": 8,
          "STAGES": 3, "GROUP": 8, "MIN_BLOCKS": 1}, _PIPELINED_SPACE, **_PIPELINED,
         description="cuBLAS's tile recipe, fragments double-buffered in registers across k-steps and k-tiles"),
    Rung("12_async_transpose.cu", "sgemm_async_transpose", _PIPELINED_TEMPLATE,
         {"BM": 256, "BN": 128, "BK": 8, "WM": 64, "WN": 64, "WMITER": 2, "WNITER": 2, "TM": 4, "TN": 8,
          "STAGES": 3, "GROUP": 8, "MIN_BLOCKS": 1}, _PIPELINED_SPACE,
         **{**_PIPELINED, "check": _transposed_copy_check, "dynamic_smem": _transposed_smem},
         description="cuBLAS's tile recipe with A transposed into shared memory by 4-byte cp.async: 8×16 "
                     "accumulators and double-buffered fragments within the register file"),
    Rung("13_split_barriers.cu", "sgemm_split_barriers", _PIPELINED_TEMPLATE,
         {"BM": 256, "BN": 128, "BK": 8, "WM": 64, "WN": 64, "WMITER": 2, "WNITER": 2, "TM": 4, "TN": 8,
          "STAGES": 3, "GROUP": 8, "MIN_BLOCKS": 1}, _PIPELINED_SPACE,
         **{**_PIPELINED, "check": _transposed_copy_check, "dynamic_smem": _split_barriers_smem},
         description="rung 12 with each stage handed over by two mbarriers (copies landed; every thread left it) "
                     "instead of a block-wide barrier per k-tile, and no bounds tests in the copies of inner tiles"),
)


@dataclass
class Compiled:
    rung: Rung
    params: dict
    kernels: dict = field(default_factory=dict)  # vec flag (or None) -> cupy RawKernel
    smem: int = 0


def _compile(rung: Rung, params: Mapping) -> tuple[Compiled, dict]:
    import cupy

    problem = rung.problems(params, cupy.cuda.Device().attributes["MaxSharedMemoryPerBlockOptin"])
    if problem:
        raise ValueError(f"{rung.name} cannot use {dict(params)}: {problem}")
    flags = (True, False) if rung.vec else (None,)
    names = {flag: rung.expression(params, flag) for flag in flags}
    module = cupy.RawModule(code=(HERE / rung.file).read_text(), options=("-std=c++17", f"-I{HERE}", *rung.options),
                            name_expressions=list(names.values()))
    compiled = Compiled(rung, dict(params), smem=rung.dynamic_smem(params))
    facts = {}
    for flag, name in names.items():
        kernel = module.get_function(name)
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


# Shapes whose launch geometry a code digest records: a square one and one off every tile
PROBE_SHAPES = ((4096, 4096), (1000, 777))


def code(rung: Rung, params: Mapping, units: tuple[tuple[str, ...], ...] = (), persistent: bool = False) -> dict:
    """What NVRTC makes of the rung's instantiations for `params` (and of `units`, more programs of its file, each a
    list of name expressions), and how they are launched: a tuning trial's identity (kernels/generated.py)."""
    flags = (True, False) if rung.vec else (None,)
    programs = ((*(rung.expression(params, flag) for flag in flags),), *units)
    options = ("-std=c++17", *rung.options) if rung.options else ("-std=c++17", generated.ARCH)
    texts = [generated.ptx(HERE / rung.file, list(names), options) for names in programs]
    return {"compiler": generated.nvrtc_version(), "ptx": generated.digest("\n".join(texts)),
            "launch": {"shapes": [rung.launch(params, m, n) for m, n in PROBE_SHAPES],
                       "dynamic_smem": rung.dynamic_smem(params), "persistent": persistent}}


def _unsupported(m, n, k, params) -> str | None:
    if max(m * k, k * n, m * n) >= INT32_ELEMENTS:
        return "a matrix with 2^31 or more elements (the kernels index with 32-bit int)"
    return None


def variant(rung: Rung, modes: tuple[str, ...] = ("fp32",)) -> Variant:
    """A rung as a variant of the cupy family: compiled with NVRTC, launched by `Rung.launch`. Other ladders of raw
    CUDA files (the tensor-core rungs) declare their rungs and call this too."""
    def build(mode, params, cache_dir):
        return Built(*_compile(rung, params))

    return Variant(family="cupy", name=rung.name, device="cuda", modes=modes, build=build, run=_run,
                   params=dict(rung.defaults), space=dict(rung.space), check_params=rung.problems,
                   unsupported=_unsupported, source_files=(str(HERE / rung.file), str(HERE / "common.cuh"),
                                                           *(str(HERE / f) for f in _includes(rung.file))),
                   compilers=NVRTC, description=rung.description,
                   generated=lambda mode, params: code(rung, params))


def _includes(file: str) -> list[str]:
    """The rung files a rung #includes (08 builds on 07, 09 on 08), transitively."""
    found = []
    for line in (HERE / file).read_text().splitlines():
        if line.startswith('#include "') and line.endswith('.cu"'):
            inner = line.split('"')[1]
            found += [inner, *_includes(inner)]
    return found


for _rung in RUNGS:
    register(variant(_rung))

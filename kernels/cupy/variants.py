"""The CuPy FP32 ladder, rung by rung: 01_naive.cu … 14_warp_specialized.cu, each declared here in its order (its
kernel template, parameters, search space, checks and launch shape; kernels/cupy/nvrtc.py compiles and launches it,
and rung 14, fed by TMA, is launched by tensorcore/tma.py with its tensor maps).
"""
from __future__ import annotations

from kernels.cupy.nvrtc import SM90A, Rung, declare
from kernels.cupy.tensorcore import tma
from kernels.tiles import accumulators, divides, static_smem, warp_threads, warp_tiles


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


def _warp_specialized_smem(p) -> int:
    """Its stages, 1 KiB of slack to align them to the swizzle's period, and a full and an empty mbarrier a stage."""
    return p["STAGES"] * p["BK"] * (p["BM"] + p["BN"]) * 4 + 1024 + 2 * p["STAGES"] * 8


def _warp_specialized_check(p) -> str | None:
    if p["BM"] * p["BN"] != 256 * 128:
        return "8 consumer warps of 64×64 (BM×BN 256×128 or 128×256): their registers and the producer's fill the SM"
    return None


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

RUNGS = declare(
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
    Rung("14_warp_specialized.cu", "sgemm_warp_specialized", ("BM", "BN", "BK", "STAGES", "GROUP"),
         {"BM": 256, "BN": 128, "BK": 32, "STAGES": 4, "GROUP": 8},
         {"BM": (128, 256), "BN": (128, 256), "BK": (8, 16, 32), "STAGES": (3, 4, 6, 8), "GROUP": (8, 16)},
         threads=lambda p: (p["BM"] // 64) * (p["BN"] // 64) * 32 + 128, tile=lambda p: (p["BM"], p["BN"]),
         check=_warp_specialized_check, vec=True, dynamic_smem=_warp_specialized_smem, options=(SM90A,),
         persistent=True, launcher=tma.FFMA_TILES,
         description="one thread of a producer warpgroup copies the tiles by TMA; consumer warps (8×16 accumulators, "
                     "232 registers by setmaxnreg) only read float4s of shared memory and issue FFMAs; persistent "
                     "blocks"),
)

"""The tensor-core ladder: CuPy raw CUDA, one file per idea, in TF32 and BF16 where each applies (KERNELS):
tc01_mma_sync.cu … tc04_wgmma.cu here, the rungs that copy with TMA (tc05 … tc07) in kernels/cupy/tma.py.

Built, compiled with NVRTC and launched as the FP32 ladder's rungs are (`ladder.Rung`, `ladder.variant`).
Validated and tuned on an H100 (tests/test_gpu.py; config/tuning/), but not among the built-in modules: the default
run is over its time budget already. A config adds them with `variant_modules: [kernels.cupy.tensorcore,
kernels.cupy.tma]` (reports/examples/h100-tensorcore). The register estimates in the checks were fitted to nvcc
13.5's ptxas; the tune stage still refuses a candidate that spills with the GPU node's compiler.
"""
from __future__ import annotations

import dataclasses

from kernels.cupy import ladder
from kernels.registry import Variant, register
from kernels.tiles import accumulators, block_threads, cdiv, static_smem, warp_threads

SM90A = "-arch=sm_90a"  # the NVRTC option of the rungs that issue wgmma (CuPy's own -arch=sm_90 lacks it)


def _mma_smem_floats(p) -> int:
    """A's BM×BK tile with rows padded by 4 floats, B's BK×BN tile by 8 (conflict-free fragment reads)."""
    return p["BM"] * (p["BK"] + 4) + p["BK"] * (p["BN"] + 8)


def _mma_warps_check(p) -> str | None:
    if p["BM"] % p["WM"] or p["BN"] % p["WN"] or p["WM"] % 16 or p["WN"] % 8 or p["BK"] % 8:
        return "warp tiles must divide the block tile into whole 16×8 mma tiles, BK a multiple of 8"
    return block_threads(warp_threads(p)) or accumulators(p["WM"] * p["WN"] // 32)


def _mma_tiles_check(p) -> str | None:
    return _mma_warps_check(p) or static_smem(_mma_smem_floats(p))


def _fragment_registers(p) -> int:
    """A warp's fragments of one k-step, per thread: 4 registers per 16×8 A tile, 2 per 8×8 B tile."""
    return (p["WM"] // 16) * 4 + (p["WN"] // 8) * 2


def _registers(threads: int, need: int, min_blocks: int = 1) -> str | None:
    budget = min(255, 65536 // (threads * min_blocks))
    return None if need <= budget else f"about {need} registers a thread, {budget} left by {min_blocks} block(s) per SM"


def _ldmatrix_check(p) -> str | None:
    """Registers (ptxas's counts over the space): accumulators, fragments, the float4s of a k-tile's copy, which
    are all loaded before they are stored, and about 24 for indices (BF16's, with ldmatrix.trans, the more)."""
    bad = _mma_tiles_check(p)
    if bad:
        return bad
    staged = sum(cdiv(rows * cols // 4, warp_threads(p)) for rows, cols in ((p["BM"], p["BK"]), (p["BK"], p["BN"])))
    return _registers(warp_threads(p), p["WM"] * p["WN"] // 32 + _fragment_registers(p) + 4 * staged + 24)


def _pipelined_mma_smem(p) -> int:
    return p["STAGES"] * _mma_smem_floats(p) * 4


def _pipelined_mma_check(p) -> str | None:
    """Registers (ptxas's counts over the space): accumulators, two buffers of fragments and about 60 for the
    cp.async source pointers and indices."""
    if p["BK"] % 16:
        return "BK must be a multiple of 16 (an even count of k-steps: the fragment buffers alternate)"
    if warp_threads(p) % (p["BN"] // 4):
        return "the threads of a block must copy whole rows of B's tile as float4s"
    if p["MIN_BLOCKS"] * (_pipelined_mma_smem(p) + 1024) > 228 * 1024:  # an SM's 228 KiB, 1 KiB kept per block
        return f"{p['MIN_BLOCKS']} blocks of {_pipelined_mma_smem(p)} bytes of shared memory do not fit on an SM"
    return _mma_warps_check(p) or _registers(warp_threads(p), p["WM"] * p["WN"] // 32 + 2 * _fragment_registers(p)
                                             + 60, p["MIN_BLOCKS"])


def _warpgroup_threads(p) -> int:
    return p["BM"] // 64 * 128


def _wgmma_smem(p) -> int:
    """STAGES buffers of A's BM×64 and B's 64×BN bfloat16 tiles, and 1 KiB to align them to 1024 bytes."""
    return p["STAGES"] * (p["BM"] + p["BN"]) * 64 * 2 + 1024


def _wgmma_check(p) -> str | None:
    """Registers (ptxas's counts over the space): 64 accumulators per 128 columns, about 40 for the rest."""
    if p["BM"] % 64 or p["BN"] % 128:
        return "BM must be whole warpgroup tiles of 64 rows and BN whole wgmma tiles of 128 columns"
    if p["STAGES"] < 3:
        return "STAGES must be at least 3: a buffer being read, one under the wgmma group in flight, one filling"
    return _registers(_warpgroup_threads(p), p["BN"] // 128 * 64 + 40)  # (shared memory: Rung.problems)


RUNGS = (
    ladder.Rung("tc01_mma_sync.cu", "tc_mma_sync", ("BM", "BN", "BK", "WM", "WN"),
                {"BM": 128, "BN": 128, "BK": 32, "WM": 64, "WN": 32},
                {"BM": (64, 128), "BN": (64, 128), "BK": (16, 32), "WM": (32, 64), "WN": (32, 64)},
                threads=warp_threads, tile=lambda p: (p["BM"], p["BN"]),
                check=_mma_tiles_check,
                description="mma.sync (m16n8k8 TF32 from tiles rounded on the way in, m16n8k16 BF16) from shared "
                            "tiles, fragments read with scalar loads"),
    ladder.Rung("tc02_ldmatrix.cu", "tc_ldmatrix", ("BM", "BN", "BK", "WM", "WN"),
                {"BM": 128, "BN": 128, "BK": 32, "WM": 64, "WN": 64},
                {"BM": (64, 128, 256), "BN": (64, 128, 256), "BK": (16, 32), "WM": (32, 64), "WN": (32, 64)},
                threads=warp_threads, tile=lambda p: (p["BM"], p["BN"]), check=_ldmatrix_check, vec=True,
                description="A fragments with ldmatrix.x4 from a padded tile (B's by ldmatrix.x4.trans in BF16), "
                            "float4 copies, TF32 fragments rounded in registers, 64×64 warp tiles"),
    ladder.Rung("tc03_cp_async.cu", "tc_cp_async", ("BM", "BN", "BK", "WM", "WN", "STAGES", "GROUP", "MIN_BLOCKS"),
                {"BM": 128, "BN": 128, "BK": 32, "WM": 64, "WN": 64, "STAGES": 3, "GROUP": 8, "MIN_BLOCKS": 2},
                {"BM": (64, 128, 256), "BN": (64, 128, 256), "BK": (16, 32), "WM": (32, 64), "WN": (32, 64),
                 "STAGES": (2, 3, 4), "GROUP": (8,), "MIN_BLOCKS": (1, 2)},
                threads=warp_threads, tile=lambda p: (p["BM"], p["BN"]), check=_pipelined_mma_check, vec=True,
                grid_1d=True, dynamic_smem=_pipelined_mma_smem,
                description="tc02 with a cp.async multi-stage pipeline, fragments double-buffered in registers, "
                            "grouped block order; in BF16 mma m16n8k16 with B through ldmatrix.trans"),
    ladder.Rung("tc04_wgmma.cu", "tc_wgmma_bf16", ("BM", "BN", "STAGES", "GROUP"),
                {"BM": 128, "BN": 256, "STAGES": 3, "GROUP": 8},
                {"BM": (64, 128, 256), "BN": (128, 256), "STAGES": (3, 4, 5, 6), "GROUP": (8, 16)},
                threads=_warpgroup_threads, tile=lambda p: (p["BM"], p["BN"]), check=_wgmma_check,
                vec=True, grid_1d=True, dynamic_smem=_wgmma_smem, options=(SM90A,),
                description="wgmma.m64n128k16 with both operands read from 128-byte-swizzled shared memory "
                            "(B MN-major, read transposed), a group in flight across k-tiles, cp.async pipeline; BF16"),
)


# Each rung's kernel per mode: a BF16 kernel takes the same parameters (BK counts 4-byte words along k), tiles, checks
# and launch as its TF32 one; wgmma reads MN-major B transposed only for 16-bit types, so tc04 is BF16 only (tc05 and
# tc07 show two ways around that in TF32).
KERNELS = {"tc01_mma_sync": {"tf32": "tc_mma_sync", "bf16": "tc_mma_sync_bf16"},
           "tc02_ldmatrix": {"tf32": "tc_ldmatrix", "bf16": "tc_ldmatrix_bf16"},
           "tc03_cp_async": {"tf32": "tc_cp_async", "bf16": "tc_cp_async_bf16"},
           "tc04_wgmma": {"bf16": "tc_wgmma_bf16"}}


def in_mode(rung: ladder.Rung, mode: str) -> ladder.Rung:
    return dataclasses.replace(rung, kernel=KERNELS[rung.name][mode])


def _compute_capability() -> str:
    import cupy

    return cupy.cuda.Device().compute_capability


def variant(rung: ladder.Rung) -> Variant:
    """A rung in each of its modes: one variant, each mode's kernel built from its own instantiation (BF16 operands
    arrive as uint16 arrays, registry.OPERAND_DTYPE) and launched by the ladder. A rung built for sm_90a (wgmma) is
    refused on other GPUs, whose driver could not load it."""
    by_mode = {mode: ladder.variant(in_mode(rung, mode), modes=(mode,)) for mode in KERNELS[rung.name]}

    def build(mode, params, cache_dir):
        if SM90A in rung.options:
            capability = _compute_capability()
            if capability != "90":
                raise ValueError(f"{rung.name} issues wgmma, which only sm_90 GPUs have (this one is sm_{capability})")
        return by_mode[mode].build(mode, params, cache_dir)

    def generated(mode, params):
        return by_mode[mode].generated(mode, params)

    return dataclasses.replace(next(iter(by_mode.values())), modes=tuple(by_mode), build=build, generated=generated)


for _rung in RUNGS:
    register(variant(_rung))

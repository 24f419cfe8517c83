"""The tensor-core ladder, rung by rung: tc01_mma_sync.cu … tc09_registers_tma_store.cu, each declared here in its
order, with its kernel per mode (TF32 and BF16 where each applies; a BF16 kernel takes the same parameters as its TF32
one, BK counting 4-byte words along k). Compiled and launched as every CuPy rung is (kernels/cupy/nvrtc.py); the rungs
that copy with TMA (tc05 … tc09) are launched by tensorcore/tma.py, which encodes their tensor maps. wgmma reads
MN-major B transposed only for 16-bit types, so tc04 is BF16 only; tc05 and tc07 show two ways around that in TF32.

The register estimates in the checks were fitted to nvcc 13.5's ptxas; the tune stage still refuses a candidate that
spills with the GPU node's compiler.
"""
from __future__ import annotations

import functools
from pathlib import Path

from kernels.cupy import nvrtc
from kernels.cupy.nvrtc import SM90A, declare
from kernels.cupy.tensorcore import tma
from kernels.tiles import accumulators, block_threads, cdiv, registers, static_smem, warp_threads

Rung = functools.partial(nvrtc.Rung, folder=Path(__file__).parent)


def _mma_smem_floats(p) -> int:
    """A's BM×BK tile with rows padded by 4 floats, B's BK×BN tile by 8 (conflict-free fragment reads)."""
    return p["BM"] * (p["BK"] + 4) + p["BK"] * (p["BN"] + 8)


def _mma_warps_check(p) -> str | None:
    if p["BM"] % p["WM"] or p["BN"] % p["WN"] or p["WM"] % 16 or p["WN"] % 8 or p["BK"] % 8:
        return "warp tiles must divide the block tile into whole 16×8 mma tiles, BK a multiple of 8"
    return block_threads(warp_threads(p)) or accumulators(p["WM"] * p["WN"] // 32)


def _mma_tiles_check(p) -> str | None:
    return _mma_warps_check(p) or static_smem(_mma_smem_floats(p))


def _fragmentregisters(p) -> int:
    """A warp's fragments of one k-step, per thread: 4 registers per 16×8 A tile, 2 per 8×8 B tile."""
    return (p["WM"] // 16) * 4 + (p["WN"] // 8) * 2


def _ldmatrix_check(p) -> str | None:
    """Registers (ptxas's counts over the space): accumulators, fragments, the float4s of a k-tile's copy, which
    are all loaded before they are stored, and about 24 for indices (BF16's, with ldmatrix.trans, the more)."""
    bad = _mma_tiles_check(p)
    if bad:
        return bad
    staged = sum(cdiv(rows * cols // 4, warp_threads(p)) for rows, cols in ((p["BM"], p["BK"]), (p["BK"], p["BN"])))
    return registers(warp_threads(p), p["WM"] * p["WN"] // 32 + _fragmentregisters(p) + 4 * staged + 24)


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
    return _mma_warps_check(p) or registers(warp_threads(p), p["WM"] * p["WN"] // 32 + 2 * _fragmentregisters(p)
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
    return registers(_warpgroup_threads(p), p["BN"] // 128 * 64 + 40)  # (shared memory: Rung.problems)


def _threads(p) -> int:
    return (p["BM"] // 64 + 1) * 128  # a producer warpgroup and a consumer warpgroup per 64 rows


def _smem(p) -> int:
    """STAGES buffers of BM lines of A and BN of B (128 bytes of k each), 1 KiB to align them to 1024 bytes, and a
    full and an empty barrier (8 bytes each) per stage."""
    return p["STAGES"] * ((p["BM"] + p["BN"]) * tma.LINE_BYTES + 16) + 1024


def _check(p) -> str | None:
    """Registers (ptxas's counts over the space): a consumer's BN / 2 accumulators and about 30 for the rest."""
    if p["BM"] % 64 or p["BN"] % 128 or p["BM"] > 256:
        return "BM must be 64 to 256 rows of consumer warpgroups (a TMA box has 256 rows at most), BN whole 128s"
    if p["STAGES"] < 3:
        return "STAGES must be at least 3: a stage under the wgmma group in flight, one being read, one filling"
    return registers(_threads(p), p["BN"] // 2 + 30)  # (shared memory: Rung.problems)


STORE_BOX_BYTES = 64 * 128  # tc08's staging buffer: 64 rows of C × one 128-byte line


def _tma_store_smem(p) -> int:
    """tc05's stages and barriers, and BUFFERS staging boxes per consumer warpgroup."""
    return _smem(p) + p["BM"] // 64 * p["BUFFERS"] * STORE_BOX_BYTES


_TMA_KERNELS = {"bf16": "tc_tma_bf16", "tf32": "tc_tma_tf32"}
_SPACE = {"BM": (64, 128, 256), "BN": (128, 256), "STAGES": (3, 4, 5, 6), "GROUP": (8, 16)}
_TMA = dict(template=("BM", "BN", "STAGES", "GROUP"), defaults={"BM": 128, "BN": 256, "STAGES": 4, "GROUP": 8},
            space=_SPACE, threads=_threads, tile=lambda p: (p["BM"], p["BN"]), check=_check, vec=True, grid_1d=True,
            dynamic_smem=_smem, options=(SM90A,), launcher=tma.TRANSPOSED)

_TMA_STORE = {**_TMA, "template": ("BM", "BN", "STAGES", "GROUP", "BUFFERS"),
              "defaults": {**_TMA["defaults"], "STAGES": 3, "BUFFERS": 2}, "space": {**_SPACE, "BUFFERS": (1, 2)},
              "dynamic_smem": _tma_store_smem, "launcher": tma.STORED_BY_TMA}

REGISTERS_COLUMNS = 128  # tc07's columns of C per block: two consumer warpgroups of 64 (RS_COLUMNS)
REGISTERS_STORE_BYTES = 2 * 2 * STORE_BOX_BYTES  # tc09's staging, per BUFFERS: two warpgroups' pairs of 64×32 boxes


def _registers_check(p) -> str | None:
    """tc07's consumers take 232 registers each (setmaxnreg): BM / 2 accumulators, two k-tiles of fragments (32)."""
    if p["STAGES"] < 3:
        return "STAGES must be at least 3: a stage under the wgmma group in flight, one being read, one filling"
    return None if p["BM"] // 2 + 32 + 30 <= 232 else f"about {p['BM'] // 2 + 62} registers a consumer thread, 232 left"


RUNGS = declare(
    Rung("tc01_mma_sync.cu", {"tf32": "tc_mma_sync", "bf16": "tc_mma_sync_bf16"}, ("BM", "BN", "BK", "WM", "WN"),
         {"BM": 128, "BN": 128, "BK": 32, "WM": 64, "WN": 32},
         {"BM": (64, 128), "BN": (64, 128), "BK": (16, 32), "WM": (32, 64), "WN": (32, 64)},
         threads=warp_threads, tile=lambda p: (p["BM"], p["BN"]),
         check=_mma_tiles_check,
         description="mma.sync (m16n8k8 TF32 from tiles rounded on the way in, m16n8k16 BF16) from shared "
                     "tiles, fragments read with scalar loads"),
    Rung("tc02_ldmatrix.cu", {"tf32": "tc_ldmatrix", "bf16": "tc_ldmatrix_bf16"}, ("BM", "BN", "BK", "WM", "WN"),
         {"BM": 128, "BN": 128, "BK": 32, "WM": 64, "WN": 64},
         {"BM": (64, 128, 256), "BN": (64, 128, 256), "BK": (16, 32), "WM": (32, 64), "WN": (32, 64)},
         threads=warp_threads, tile=lambda p: (p["BM"], p["BN"]), check=_ldmatrix_check, vec=True,
         description="A fragments with ldmatrix.x4 from a padded tile (B's by ldmatrix.x4.trans in BF16), "
                     "float4 copies, TF32 fragments rounded in registers, 64×64 warp tiles"),
    Rung("tc03_cp_async.cu", {"tf32": "tc_cp_async", "bf16": "tc_cp_async_bf16"},
         ("BM", "BN", "BK", "WM", "WN", "STAGES", "GROUP", "MIN_BLOCKS"),
         {"BM": 128, "BN": 128, "BK": 32, "WM": 64, "WN": 64, "STAGES": 3, "GROUP": 8, "MIN_BLOCKS": 2},
         {"BM": (64, 128, 256), "BN": (64, 128, 256), "BK": (16, 32), "WM": (32, 64), "WN": (32, 64),
          "STAGES": (2, 3, 4), "GROUP": (8,), "MIN_BLOCKS": (1, 2)},
         threads=warp_threads, tile=lambda p: (p["BM"], p["BN"]), check=_pipelined_mma_check, vec=True,
         grid_1d=True, dynamic_smem=_pipelined_mma_smem,
         description="tc02 with a cp.async multi-stage pipeline, fragments double-buffered in registers, "
                     "grouped block order; in BF16 mma m16n8k16 with B through ldmatrix.trans"),
    Rung("tc04_wgmma.cu", {"bf16": "tc_wgmma_bf16"}, ("BM", "BN", "STAGES", "GROUP"),
         {"BM": 128, "BN": 256, "STAGES": 3, "GROUP": 8},
         {"BM": (64, 128, 256), "BN": (128, 256), "STAGES": (3, 4, 5, 6), "GROUP": (8, 16)},
         threads=_warpgroup_threads, tile=lambda p: (p["BM"], p["BN"]), check=_wgmma_check,
         vec=True, grid_1d=True, dynamic_smem=_wgmma_smem, options=(SM90A,),
         description="wgmma.m64n128k16 with both operands read from 128-byte-swizzled shared memory "
                     "(B MN-major, read transposed), a group in flight across k-tiles, cp.async pipeline; BF16"),
    Rung("tc05_tma.cu", _TMA_KERNELS, **_TMA,
         description="wgmma fed by TMA copies from a producer warpgroup, stages handed over by mbarriers, "
                     "n256 instructions where BN allows; TF32 reads a K-major copy of B made first (timed)"),
    Rung("tc06_persistent.cu", _TMA_KERNELS, **_TMA, persistent=True,
         description="tc05 with one persistent block per SM looping over tiles: the producer fills the next "
                     "tile's stages while the consumers store"),
    Rung("tc07_registers.cu", {"tf32": "tc_registers_tf32"}, ("BM", "STAGES", "GROUP"),
         {"BM": 256, "STAGES": 4, "GROUP": 8}, {"BM": (128, 256), "STAGES": (3, 4, 5, 6), "GROUP": (8, 16)},
         threads=lambda p: 3 * 128, tile=lambda p: (p["BM"], REGISTERS_COLUMNS), check=_registers_check,
         grid_1d=True, dynamic_smem=lambda p: _smem({**p, "BN": REGISTERS_COLUMNS}), options=(SM90A,),
         persistent=True, launcher=tma.AS_STORED,
         description="TF32 as Cᵀ = Bᵀ·Aᵀ: B's fragments loaded from its MN-major tile into registers (wgmma's A), "
                     "no copy of B; tc06's persistent blocks"),
    Rung("tc08_tma_store.cu", {"bf16": "tc_tma_store_bf16", "tf32": "tc_tma_store_tf32"}, **_TMA_STORE,
         persistent=True,
         description="tc06 with C stored by TMA: each consumer warpgroup stages 32 columns at a time in swizzled "
                     "shared memory and goes on while the copy drains"),
    Rung("tc09_registers_tma_store.cu", {"tf32": "tc_registers_tma_store_tf32"}, ("BM", "STAGES", "GROUP", "BUFFERS"),
         {"BM": 256, "STAGES": 3, "GROUP": 8, "BUFFERS": 1},
         {"BM": (128, 256), "STAGES": (3, 4, 5, 6), "GROUP": (8, 16), "BUFFERS": (1, 2)},
         threads=lambda p: 3 * 128, tile=lambda p: (p["BM"], REGISTERS_COLUMNS), check=_registers_check, vec=True,
         grid_1d=True, options=(SM90A,), persistent=True, launcher=tma.AS_STORED_STORED_BY_TMA,
         dynamic_smem=lambda p: _smem({**p, "BN": REGISTERS_COLUMNS}) + p["BUFFERS"] * REGISTERS_STORE_BYTES,
         description="tc07 with tc08's TMA stores: each consumer warpgroup transposes its Cᵀ accumulators into "
                     "swizzled 64-row boxes and goes on while the copies drain"),
)

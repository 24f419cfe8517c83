"""The tensor-core ladder: CuPy raw CUDA, one file per idea (tc01_mma_sync.cu …), TF32 (BF16 comes with its mode).

Built, compiled with NVRTC and launched as the FP32 ladder's rungs are (`ladder.Rung`, `ladder.variant`).
Staged: not among the built-in modules until its kernels have run validated on a GPU; a config adds it with
`variant_modules: [kernels.cupy.tensorcore]`.
"""
from __future__ import annotations

from kernels.cupy import ladder
from kernels.registry import register
from kernels.tiles import accumulators, block_threads, static_smem, warp_threads


def _mma_tiles_check(p) -> str | None:
    if p["BM"] % p["WM"] or p["BN"] % p["WN"] or p["WM"] % 16 or p["WN"] % 8 or p["BK"] % 8:
        return "warp tiles must divide the block tile into whole 16×8 mma tiles, BK a multiple of 8"
    return (block_threads(warp_threads(p))
            or static_smem(p["BM"] * (p["BK"] + 4) + p["BK"] * (p["BN"] + 8))
            or accumulators(p["WM"] * p["WN"] // 32))


RUNGS = (
    ladder.Rung("tc01_mma_sync.cu", "tc_mma_sync", ("BM", "BN", "BK", "WM", "WN"),
                {"BM": 128, "BN": 128, "BK": 32, "WM": 64, "WN": 32},
                {"BM": (64, 128), "BN": (64, 128), "BK": (16, 32), "WM": (32, 64), "WN": (32, 64)},
                threads=warp_threads, tile=lambda p: (p["BM"], p["BN"]),
                check=_mma_tiles_check,
                description="mma.sync.m16n8k8 TF32 from shared tiles rounded to TF32, fragments read with scalar "
                            "loads"),
)


for _rung in RUNGS:
    register(ladder.variant(_rung, modes=("tf32",)))

"""The b2b family's variants, D = (A0·B0)·B1: the fused rungs (one CUDA file each; fused.py compiles and launches
them) and the unfused baselines (two calls of a plain GEMM variant; unfused.py)."""
from __future__ import annotations

import kernels.cpu
import kernels.cublas
import kernels.cupy  # noqa: F401  (the families whose GEMMs the baselines compose register them)
from kernels import registry
from kernels.b2b.fused import Rung, variant
from kernels.b2b.unfused import unfused
from kernels.registry import register

RUNGS = (
    Rung("01_fused_simt.cu", "b2b_fused_simt", ("fp32",), "fused (A0·B0)·B1, FP32 FFMA register tiles; "
         "the A1 slice stays in shared memory"),
    Rung("02_fused_mma.cu", "b2b_fused_mma", ("tf32",), "fused (A0·B0)·B1 on TF32 tensor cores (mma.sync); "
         "the A1 slice stays in shared memory"),
    Rung("03_fused_warptile.cu", "b2b_fused_warptile", ("fp32",), "fused (A0·B0)·B1, FP32 FFMA with the CuPy "
         "ladder's float4 warp-tile inner loop; the A1 slice stays in shared memory"),
    Rung("04_fused_resident.cu", "b2b_fused_resident", ("tf32",), "rung 2 for K0, N0, N1 ≤ 64: persistent blocks "
         "hold B0 and B1 in shared memory and stream A0, the next tile's copy in flight", resident=True),
    Rung("05_fused_wgmma.cu", "b2b_fused_wgmma", ("tf32",), "rung 4's shapes on warpgroup MMAs (sm_90a): A0 by TMA, "
         "B0ᵀ and B1ᵀ resident, the intermediate kept in the accumulators as the second product's A", wgmma=True),
)

GEMMS = ("cublas/gemm", "cupy/10_pipelined", "cpu/numpy-blas")  # the plain GEMMs whose two calls are a baseline

for _rung in RUNGS:
    register(variant(_rung))
for _key in GEMMS:
    register(unfused(registry.registered(_key)))

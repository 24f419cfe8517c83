"""The cuBLAS family's one variant: the baseline every GEMM of its mode is compared with (its role)."""
from __future__ import annotations

from kernels.cublas import gemm
from kernels.registry import Variant, register

register(Variant(
    family="cublas", name="gemm", device="cuda", modes=("fp32", "tf32", "bf16"), build=gemm.build, run=gemm.run,
    role="baseline", description="cublasGemmEx, FP32 C; fp32 = CUBLAS_COMPUTE_32F, tf32 = "
                                 "CUBLAS_COMPUTE_32F_FAST_TF32, bf16 = BF16 A and B with CUBLAS_COMPUTE_32F",
))

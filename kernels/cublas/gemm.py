"""cuBLAS SGEMM through cublasGemmEx: the baseline every other family is compared with.

fp32: FP32 storage, FP32 compute (CUBLAS_COMPUTE_32F, SIMT FFMA).
tf32: FP32 storage, TF32 tensor cores (CUBLAS_COMPUTE_32F_FAST_TF32).
bf16: BF16 A and B, FP32 C, FP32 accumulation on the BF16 tensor cores (CUBLAS_COMPUTE_32F).
Row-major C = A @ B is column-major C^T = B^T @ A^T, so B goes first and no transpose is needed.
"""
from __future__ import annotations

from kernels.registry import OPERAND_DTYPE, Built

CUDA_R_32F, CUDA_R_16BF = 0, 14
CUDA_TYPE = {"float32": CUDA_R_32F, "uint16": CUDA_R_16BF}  # by registry.OPERAND_DTYPE (uint16: bfloat16 bits)
CUBLAS_OP_N = 0
CUBLAS_GEMM_DEFAULT = -1
CUBLAS_COMPUTE_32F, CUBLAS_COMPUTE_32F_FAST_TF32 = 68, 77
COMPUTE_TYPE = {"fp32": CUBLAS_COMPUTE_32F, "tf32": CUBLAS_COMPUTE_32F_FAST_TF32, "bf16": CUBLAS_COMPUTE_32F}


def build(mode, params, cache_dir):
    import cupy
    import numpy as np
    from cupy_backends.cuda.libs import cublas

    handle = cupy.cuda.device.get_cublas_handle()
    scalars = np.array([1.0, 0.0], dtype=np.float32)  # alpha, beta on the host (default pointer mode)
    artifact = {"handle": handle, "compute": COMPUTE_TYPE[mode], "operands": CUDA_TYPE[OPERAND_DTYPE[mode]],
                "scalars": scalars, "cublas": cublas}
    return Built(artifact, {"cublas_version": cublas.getVersion(handle), "compile_s": 0.0})


def run(artifact, a, b, c, stream):
    m, k = a.shape
    n = b.shape[1]
    alpha = artifact["scalars"].ctypes.data
    artifact["cublas"].setStream(artifact["handle"], stream.ptr)  # the handle is CuPy's, which rebinds it too
    artifact["cublas"].gemmEx(
        artifact["handle"], CUBLAS_OP_N, CUBLAS_OP_N, n, m, k,
        alpha, b.data.ptr, artifact["operands"], n, a.data.ptr, artifact["operands"], k,
        alpha + 4, c.data.ptr, CUDA_R_32F, n,
        artifact["compute"], CUBLAS_GEMM_DEFAULT)

"""cuBLAS baseline through CuPy: gemm.py calls cublasGemmEx, variants.py declares it."""
from kernels.cublas import variants  # noqa: F401  (registers the family's variants)

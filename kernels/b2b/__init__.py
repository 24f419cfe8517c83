"""The back-to-back GEMM workload's variants, D = (A0·B0)·B1: fused kernels and unfused baselines."""

UNFUSED_PREFIX = "b2b_unfused"  # variants named so write A1 = A0·B0 to memory, then compute A1·B1: the baselines

from kernels.b2b import variants  # noqa: E402, F401  (registers the family's variants)

"""CPU baselines: they let anyone run the whole pipeline on a machine without a GPU."""
from kernels.cpu import numba_tiled, numpy_blas  # noqa: F401  (register the family's variants)

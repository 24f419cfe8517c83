"""The Numba CUDA ladder: one Python file per rung, declared in ladder.py."""
from kernels.numba import ladder  # noqa: F401  (registers the family's variants)

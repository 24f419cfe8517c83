"""The Numba CUDA ladder: one Python file per rung, declared in variants.py."""
from kernels.numba import variants  # noqa: F401  (registers the family's variants)

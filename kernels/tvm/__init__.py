"""TVM schedules, one file per rung, declared in variants.py."""
from kernels.tvm import variants  # noqa: F401  (registers the family's variants)

"""TVM schedules, one file per rung, declared in family.py."""
from kernels.tvm import family  # noqa: F401  (registers the family's variants)

"""CPU baselines: they let anyone run the whole pipeline on a machine without a GPU. One kernel per file, declared
in variants.py."""
from kernels.cpu import variants  # noqa: F401  (registers the family's variants)

"""CuPy raw CUDA: the FP32 ladder (01_naive.cu … 13_split_barriers.cu) and the tensor-core ladder in tensorcore/, each
rung declared in the rungs.py beside its file."""
from kernels.cupy import rungs  # noqa: F401  (registers the FP32 ladder)
from kernels.cupy.tensorcore import rungs as tensorcore_rungs  # noqa: F401  (and the tensor-core ladder)

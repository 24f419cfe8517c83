"""CuPy raw CUDA: the FP32 ladder (01_naive.cu … 14_warp_specialized.cu) and the tensor-core ladder in tensorcore/, each
rung declared in the variants.py beside its file."""
# The order they register in: the FP32 ladder, then the tensor-core ladder.
# isort: off
import kernels.cupy.variants  # noqa: F401
import kernels.cupy.tensorcore.variants  # noqa: F401
# isort: on

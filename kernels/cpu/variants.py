"""The CPU baselines, for machines with no GPU: NumPy's BLAS and a Numba-parallel tiled loop."""
from __future__ import annotations

from kernels.cpu import numba_tiled, numpy_blas
from kernels.registry import Variant, register

register(Variant(family="cpu", name="numba-tiled", device="cpu", modes=("fp32",),
                 build=numba_tiled.build, run=numba_tiled.run,
                 params={"tile_m": 64, "tile_n": 256, "tile_k": 128},
                 description="numba.njit(parallel=True), output tiles in prange, k blocked"))


register(Variant(family="cpu", name="numpy-blas", device="cpu", modes=("fp32",),
                 build=numpy_blas.build, run=numpy_blas.run,
                 description="numpy.matmul (BLAS sgemm)"))

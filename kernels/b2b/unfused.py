"""The unfused baselines of the b2b workload: A1 = A0·B0 written to memory, then D = A1·B1, each product one call
of a plain GEMM variant (cuBLAS, the CuPy ladder's last rung at its default parameters, NumPy on the CPU)."""
from __future__ import annotations

import dataclasses
import inspect

import numpy as np

from kernels import registry
from kernels.b2b import UNFUSED_PREFIX
from kernels.registry import Variant


class TwoCalls:
    """The GEMM's artifact plus one intermediate buffer per (m, n0), allocated on the first call of a shape (in
    validation or warm-up, never in a timed launch) and poisoned with NaN, so that a first product that leaves part
    of it unwritten shows in the output."""

    def __init__(self, gemm: Variant, artifact):
        self.gemm, self.artifact, self.intermediates = gemm, artifact, {}

    def __call__(self, a0, b0, b1, d, stream) -> None:
        shape = (a0.shape[0], b0.shape[1])
        a1 = self.intermediates.get(shape)
        if a1 is None:
            a1 = self.intermediates[shape] = np.full_like(a0, np.nan, shape=shape)  # a CuPy array for a CuPy a0
        self.gemm.run(self.artifact, a0, b0, a1, stream)
        self.gemm.run(self.artifact, a1, b1, d, stream)


def unfused(gemm: Variant) -> Variant:
    def build(mode, params, cache_dir):
        built = gemm.build(mode, params, cache_dir)
        return dataclasses.replace(built, artifact=TwoCalls(gemm, built.artifact))

    def unsupported(m, k0, n0, n1, params):
        return gemm.unsupported(m, n0, k0, params) or gemm.unsupported(m, n1, n0, params)

    sources = gemm.source_files or (inspect.getsourcefile(gemm.build),)
    name = UNFUSED_PREFIX if gemm.family == "cublas" else f"{UNFUSED_PREFIX}_{gemm.name}"
    # A1 is float32, so the second call takes it as an operand only in modes of float32 operands (not bf16)
    modes = tuple(m for m in gemm.modes if registry.OPERAND_DTYPE[m] == "float32")
    return Variant(family=gemm.family, name=name, device=gemm.device, modes=modes, workload="b2b",
                   build=build, run=TwoCalls.__call__, params=dict(gemm.params),
                   unsupported=unsupported, source_files=(*sources, __file__),
                   role="baseline" if gemm.role == "baseline" else "unfused",
                   description=f"two calls of {gemm.key}: A1 = A0·B0 in memory, then A1·B1")

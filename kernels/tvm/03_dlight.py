"""TVM's own default GPU schedule: dlight's rules in the order TVM's default pipeline tries them, the first that
applies. For a matrix product that is the `Matmul` rule with its CUDA configuration (8×16 threads, 4×4 outputs per
thread, k by 16, shared-memory staging, padding for any shape); a product with a dimension of 1 is a vector
product, which GEMV, Reduction or the Fallback rule takes. Nothing to tune here: the rules pick their
configuration from the target alone."""
from __future__ import annotations

from typing import Mapping

DEFAULTS: dict = {}
SPACE: dict = {}
DESCRIPTION = "dlight's default rules (TVM's out-of-the-box GPU schedule: Matmul for matrices)"


def check(p: Mapping) -> str | None:
    return None


def schedule(func, p: Mapping, target, bind: bool = True):
    """The first default rule's schedule of the matmul PrimFunc `func`; the rules bind GPU threads themselves, so
    there is no unbound form."""
    from tvm.s_tir import dlight

    if not bind:
        raise ValueError("dlight binds GPU threads itself: no CPU form of its schedule")
    for rule in (dlight.gpu.Matmul(), dlight.gpu.GEMV(), dlight.gpu.Reduction(), dlight.gpu.GeneralReduction(),
                 dlight.gpu.Fallback()):
        scheduled = rule.apply(func, target, False)
        if scheduled is not None:
            return scheduled
    raise ValueError("no dlight default rule applies to this PrimFunc")

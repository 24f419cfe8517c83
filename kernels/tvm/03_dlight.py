"""TVM's own default GPU matmul schedule: the dlight `Matmul` rule with its CUDA configuration (8×16 threads,
4×4 outputs per thread, k by 16, shared-memory staging, padding for any shape). Nothing to tune here: the
rule picks its configuration from the target alone."""
from __future__ import annotations

from typing import Mapping

DEFAULTS: dict = {}
SPACE: dict = {}
DESCRIPTION = "dlight's default Matmul rule (TVM's out-of-the-box GPU schedule)"


def check(p: Mapping) -> str | None:
    return None


def schedule(func, p: Mapping, target, bind: bool = True):
    """The rule's schedule of the matmul PrimFunc `func`; it binds GPU threads itself, so there is no unbound form."""
    from tvm.s_tir import dlight

    if not bind:
        raise ValueError("dlight binds GPU threads itself: no CPU form of its schedule")
    scheduled = dlight.gpu.Matmul().apply(func, target, False)
    if scheduled is None:
        raise ValueError("dlight's Matmul rule does not apply to this PrimFunc")
    return scheduled

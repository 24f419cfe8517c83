"""CuPy rung 13 (13_split_barriers.cu): rung 12 with its stages handed over by mbarriers, declared beside the ladder.

It is a rung of the FP32 ladder, compiled and launched by the ladder's code. It is declared here, not in
`ladder.RUNGS`, because a variant's tuning is keyed on the module that registers it: a rung added to ladder.py would
re-key every committed CuPy result, FP32 and tensor-core alike, and send every one of them back to the GPU to be
searched again, though none of their kernels changed.
"""
from __future__ import annotations

from kernels.cupy import ladder
from kernels.registry import register

_RUNG12 = next(rung for rung in ladder.RUNGS if rung.name == "12_async_transpose")


def _smem(p) -> int:
    return _RUNG12.dynamic_smem(p) + 2 * p["STAGES"] * 8  # and a full and an empty mbarrier per stage


RUNG = ladder.Rung("13_split_barriers.cu", "sgemm_split_barriers", _RUNG12.template, _RUNG12.defaults, _RUNG12.space,
                   threads=_RUNG12.threads, tile=_RUNG12.tile, check=_RUNG12.check, vec=True, grid_1d=True,
                   dynamic_smem=_smem,
                   description="rung 12 with each stage handed over by two mbarriers (copies landed; every thread "
                               "left it) instead of a block-wide barrier per k-tile, and no bounds tests in the "
                               "copies of inner tiles")

register(ladder.variant(RUNG))

"""Rung 06 with each k-step's FMAs column by column: one value of B meets this thread's values of A in turn.

Rung 06 multiplies a k-step out row by row, as rung 05 did. The CUDA C rung 12 found on an H100 that the same FMAs
issued column by column stall less on dispatch (see reports/examples/h100-fp32-ceiling); NVVM and ptxas keep the
order of the source's loops here too, so this rung asks for that order and changes nothing else.
"""
import importlib

warptile = importlib.import_module("kernels.numba.05_warptile")
prefetch = importlib.import_module("kernels.numba.06_register_prefetch")


def make(BM, BN, BK, WM, WN, WMITER, WNITER, TM, TN, GROUP):
    return warptile.kernel(BM, BN, BK, WM, WN, WMITER, WNITER, TM, TN, GROUP, steps=column_order)


def column_order(BK, WMITER, WNITER, WSUBM, WSUBN, TM, TN):
    return prefetch.prefetched_fragments(BK, WMITER, WNITER, WSUBM, WSUBN, TM, TN, columns_first=True)

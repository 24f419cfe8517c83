"""Rung 05 with its fragments double-buffered in registers: the next k-step's fragments are read from shared
memory while this k-step's FMAs run.

Nsight Compute on rung 05 shows its FMAs waiting on the shared loads just before them (short-scoreboard stalls):
each k-step reads its fragments, then multiplies them out, and two warps per scheduler cannot cover that wait.
Here k-step p + 1's fragments go into the second register set before k-step p's outer product, so a load has a
whole outer product (TM·TN·WMITER·WNITER FMAs) to arrive in. Everything else (warp tiles, the two shared buffers
fed from registers, unsigned indices, grouped block order) is rung 05's kernel, with this inner loop.
"""
import importlib

from numba import cuda

warptile = importlib.import_module("kernels.numba.05_warptile")
U = warptile.U


def make(BM, BN, BK, WM, WN, WMITER, WNITER, TM, TN, GROUP):
    return warptile.kernel(BM, BN, BK, WM, WN, WMITER, WNITER, TM, TN, GROUP, steps=prefetched_fragments)


def prefetched_fragments(BK, WMITER, WNITER, WSUBM, WSUBN, TM, TN, columns_first=False):
    """multiply(As, Bs, acc, a_frag, b_frag, row, col) over a k-tile, reading k-step p + 1 into one fragment set
    while k-step p's FMAs use the other (BK is even: the sets alternate in pairs of k-steps). The FMAs of a k-step
    run row by row (one value of A meets this thread's values of B in turn), or column by column."""
    AM, AN = int(WMITER * TM), int(WNITER * TN)
    ONE, TWO = U(1), U(2)

    @cuda.jit(device=True, inline="always")
    def fetch(As, Bs, a_frag, b_frag, into, p, row, col):
        for wi in range(WMITER):
            for i in range(TM):
                a_frag[into, wi * TM + i] = As[p, row + wi * WSUBM + i]
        for wj in range(WNITER):
            for j in range(TN):
                b_frag[into, wj * TN + j] = Bs[p, col + wj * WSUBN + j]

    @cuda.jit(device=True, inline="always")
    def outer_product(acc, a_frag, b_frag, of):
        if columns_first:
            for j in range(AN):
                for i in range(AM):
                    acc[i, j] += a_frag[of, i] * b_frag[of, j]
        else:
            for i in range(AM):
                for j in range(AN):
                    acc[i, j] += a_frag[of, i] * b_frag[of, j]

    @cuda.jit(device=True, inline="always")
    def multiply(As, Bs, acc, a_frag, b_frag, row, col):
        fetch(As, Bs, a_frag, b_frag, 0, U(0), row, col)
        for p in range(U(0), BK - TWO, TWO):
            fetch(As, Bs, a_frag, b_frag, 1, p + ONE, row, col)
            outer_product(acc, a_frag, b_frag, 0)
            fetch(As, Bs, a_frag, b_frag, 0, p + TWO, row, col)
            outer_product(acc, a_frag, b_frag, 1)
        fetch(As, Bs, a_frag, b_frag, 1, BK - ONE, row, col)
        outer_product(acc, a_frag, b_frag, 0)
        outer_product(acc, a_frag, b_frag, 1)

    return multiply

"""Rung 07 with shared memory fed by cp.async, STAGES k-tiles deep, as CUDA C rung 12 is.

Rungs 05–07 load the next k-tile into registers and store it to the other shared buffer after the FMAs: every
element passes through a register and a store, and only two tiles are ever in flight. Here each element of A and B
goes straight from global to shared memory by a 4-byte cp.async (kernels/numba/async_copy.py: inline PTX through
a Numba intrinsic), A transposed on the way, with STAGES - 1 tiles in flight ahead of the one multiplied out; one
barrier per k-tile, as rung 12's. An element outside the matrices is zero-filled by the copy itself.

The stages are one 3-D shared array per operand, indexed by a stage that is a constant in each unrolled copy of
the k loop (a runtime stage would stop NVVM merging neighbouring shared loads into ld.shared.v4, as rung 05 says).
The k-steps run as rung 07's: fragments double-buffered in registers, FMAs column by column.
"""
import importlib

import numpy as np
from numba import cuda, float32, uint64

from kernels.numba import async_copy

warptile = importlib.import_module("kernels.numba.05_warptile")
prefetch = importlib.import_module("kernels.numba.06_register_prefetch")
U = np.uint64


def make(BM, BN, BK, WM, WN, WMITER, WNITER, TM, TN, STAGES, GROUP):
    WSUBM, WSUBN = WM // WMITER, WN // WNITER
    TCOLS, WARPS_N = WSUBN // TN, BN // WN
    THREADS = (BM // WM) * WARPS_N * 32
    WARP_ROWS = U(32 // TCOLS)
    AM, AN = WMITER * TM, WNITER * TN
    A_SHAPE, B_SHAPE = (STAGES, BK, BM + 4), (STAGES, BK, BN + 4)  # A transposed; rows 16-byte aligned
    A_COPIES, B_COPIES = BM * BK // THREADS, BK * BN // THREADS
    A_ROWS, B_ROWS = THREADS // BK, THREADS // BN  # rows of the A tile (of B) one pass of the block copies
    PENDING = STAGES - 2  # groups a thread may leave in flight when it needs the oldest
    multiply = prefetch.prefetched_fragments(U(BK), U(WMITER), U(WNITER), U(WSUBM), U(WSUBN), U(TM), U(TN),
                                             columns_first=True)
    (BM, BN, BK, WM, WN, TM, TN, WSUBM, WSUBN, TCOLS, WARPS_N, A_ROWS, B_ROWS, GROUP) = map(
        U, (BM, BN, BK, WM, WN, TM, TN, WSUBM, WSUBN, TCOLS, WARPS_N, A_ROWS, B_ROWS, GROUP))
    ZERO, ONE = U(0), U(1)
    write_back = warptile.tile_writer(WMITER, WNITER, WSUBM, WSUBN, TM, TN)
    place = warptile.thread_place(BM, BN, WM, WN, TM, TN, GROUP, WARPS_N, WARP_ROWS, TCOLS)

    @cuda.jit(device=True, inline="always")
    def issue(a, b, As, Bs, stage, k0, row0, col0, a_row, a_col, b_row, b_col, m, n, k):
        """k-tile at k0 into `stage`: A[row0 + r, k0 + c] to As[stage, c, r], B[k0 + r, col0 + c] to Bs[stage, r, c]."""
        for copy in range(A_COPIES):
            r = a_row + copy * A_ROWS
            async_copy.copy4(As[stage], a_col, r, a, row0 + r, k0 + a_col, row0 + r < m and k0 + a_col < k)
        for copy in range(B_COPIES):
            r = b_row + copy * B_ROWS
            async_copy.copy4(Bs[stage], r, b_col, b, k0 + r, col0 + b_col, k0 + r < k and col0 + b_col < n)
        async_copy.commit()

    def sgemm_cp_async(a, b, c):
        As = cuda.shared.array(A_SHAPE, float32)
        Bs = cuda.shared.array(B_SHAPE, float32)
        acc = cuda.local.array((AM, AN), float32)
        a_frag = cuda.local.array((2, AM), float32)
        b_frag = cuda.local.array((2, AN), float32)
        m, k, n = uint64(a.shape[0]), uint64(a.shape[1]), uint64(b.shape[1])

        row0, col0, row, col, tid = place(m, n)  # as rung 05
        a_row, a_col = tid // BK, tid % BK  # lanes along k: a warp reads whole 32-byte sectors of A's rows
        b_row, b_col = tid // BN, tid % BN

        for i in range(AM):
            for j in range(AN):
                acc[i, j] = float32(0)
        tiles_k = (k + BK - ONE) // BK
        for s in range(STAGES - 1):  # the first STAGES - 1 tiles in flight (empty groups past the end)
            if uint64(s) < tiles_k:
                issue(a, b, As, Bs, s, uint64(s) * BK, row0, col0, a_row, a_col, b_row, b_col, m, n, k)
            else:
                async_copy.commit()
        for t0 in range(ZERO, tiles_k, U(STAGES)):
            for s in range(STAGES):  # unrolled: tile t0 + s is in stage s, a constant here
                t = t0 + uint64(s)
                if t < tiles_k:
                    async_copy.wait(PENDING)  # this thread's copies of tile t have landed ...
                    cuda.syncthreads()  # ... everyone's, and nobody reads tile t - 1's stage any more
                    ahead = t + U(STAGES - 1)
                    if ahead < tiles_k:  # into the stage tile t - 1 used
                        issue(a, b, As, Bs, (s + STAGES - 1) % STAGES, ahead * BK, row0, col0, a_row, a_col,
                              b_row, b_col, m, n, k)
                    else:
                        async_copy.commit()
                    multiply(As[s], Bs[s], acc, a_frag, b_frag, row, col)

        write_back(c, acc, row0 + row, col0 + col, m, n)

    return sgemm_cp_async

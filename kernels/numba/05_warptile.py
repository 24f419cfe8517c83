"""Warp tiles, double-buffered shared memory and grouped block order, as far as Numba goes.

Block → warp → thread tiles as in the CUDA rung 09, with the next k-tile's global loads in registers while
the current one is multiplied out of shared memory (two buffers, one barrier per k-tile), an unchecked fast
path for blocks and k-tiles wholly inside the matrices, and GROUP block-rows launched together so that they
share B tiles in L2.

Numba specifics that decide the speed here:
- every index is unsigned (uint64 thread ids and constants): Numba wraps negative signed indices around
  (`a[-1]`), and the `select` that costs also stops NVVM from merging four neighbouring shared loads into one
  `ld.shared.v4`;
- the two buffers are two arrays and the k loop is unrolled by two by hand, so every shared address is a
  constant offset from a base (a runtime buffer index defeats the vectoriser too);
- loops over the tile shape are unrolled by NVVM because their trip counts are closure constants.
"""
import numpy as np
from numba import cuda, float32, uint64

U = np.uint64


def make(BM, BN, BK, WM, WN, WMITER, WNITER, TM, TN, GROUP):
    return kernel(BM, BN, BK, WM, WN, WMITER, WNITER, TM, TN, GROUP, steps=one_fragment_set)


def one_fragment_set(BK, WMITER, WNITER, WSUBM, WSUBN, TM, TN):
    """multiply(As, Bs, acc, a_frag, b_frag, row, col): acc += the k-tile in shared memory, each k-step's
    fragments read into registers (set 0 of a_frag / b_frag) and multiplied out."""
    AM, AN = int(WMITER * TM), int(WNITER * TN)
    ZERO, ONE = U(0), U(1)

    @cuda.jit(device=True, inline="always")
    def outer_product(As, Bs, acc, a_frag, b_frag, p, row, col):
        """acc += this thread's rows of As[p] ⊗ its columns of Bs[p]."""
        for wi in range(WMITER):
            for i in range(TM):
                a_frag[0, wi * TM + i] = As[p, row + wi * WSUBM + i]
        for wj in range(WNITER):
            for j in range(TN):
                b_frag[0, wj * TN + j] = Bs[p, col + wj * WSUBN + j]
        for i in range(AM):
            for j in range(AN):
                acc[i, j] += a_frag[0, i] * b_frag[0, j]

    @cuda.jit(device=True, inline="always")
    def multiply(As, Bs, acc, a_frag, b_frag, row, col):
        for p in range(ZERO, BK, U(2)):  # two k per trip: half the loop overhead
            outer_product(As, Bs, acc, a_frag, b_frag, p, row, col)
            outer_product(As, Bs, acc, a_frag, b_frag, p + ONE, row, col)

    return multiply


def kernel(BM, BN, BK, WM, WN, WMITER, WNITER, TM, TN, GROUP, steps):
    """The warp-tiled kernel with `steps(BK, WMITER, WNITER, WSUBM, WSUBN, TM, TN)` as its inner loop over a
    k-tile (a later rung changes only that); fragments are two sets of registers, `a_frag[set, i]`."""
    WSUBM, WSUBN = WM // WMITER, WN // WNITER
    TCOLS, WARPS_N = WSUBN // TN, BN // WN
    THREADS = (BM // WM) * WARPS_N * 32
    WARP_ROWS = U(32 // TCOLS)
    A_LOADS, A_ROWS = BM * BK // THREADS, THREADS // BK  # A tile rows one pass of the block reads
    B_LOADS, B_ROWS = BK * BN // THREADS, THREADS // BN
    AM, AN = WMITER * TM, WNITER * TN  # accumulators per thread
    A_REGS, B_REGS = A_LOADS, B_LOADS
    A_SHAPE, B_SHAPE = (BK, BM + 4), (BK, BN + 4)  # A transposed; +4 floats keep rows 16-byte aligned
    (BM, BN, BK, WM, WN, WMITER, WNITER, WSUBM, WSUBN, TM, TN, TCOLS, WARPS_N, A_LOADS, A_ROWS, B_LOADS, B_ROWS,
     GROUP) = map(U, (BM, BN, BK, WM, WN, WMITER, WNITER, WSUBM, WSUBN, TM, TN, TCOLS, WARPS_N, A_LOADS, A_ROWS,
                      B_LOADS, B_ROWS, GROUP))
    ZERO, ONE = U(0), U(1)

    @cuda.jit(device=True, inline="always")
    def load(a, b, a_regs, b_regs, a_row, a_col, b_row, b_col, m, n, k, checked):
        """The k-tile at a_col / b_row from global memory into registers (zeros outside the matrices)."""
        if checked:
            for l in range(A_LOADS):
                row = a_row + l * A_ROWS
                a_regs[l] = a[row, a_col] if row < m and a_col < k else float32(0)
            for l in range(B_LOADS):
                row = b_row + l * B_ROWS
                b_regs[l] = b[row, b_col] if row < k and b_col < n else float32(0)
        else:  # the common case, without a comparison per element
            for l in range(A_LOADS):
                a_regs[l] = a[a_row + l * A_ROWS, a_col]
            for l in range(B_LOADS):
                b_regs[l] = b[b_row + l * B_ROWS, b_col]

    @cuda.jit(device=True, inline="always")
    def store(As, Bs, a_regs, b_regs, a_tile_row, a_tile_col, b_tile_row, b_tile_col):
        for l in range(A_LOADS):
            As[a_tile_col, a_tile_row + l * A_ROWS] = a_regs[l]
        for l in range(B_LOADS):
            Bs[b_tile_row + l * B_ROWS, b_tile_col] = b_regs[l]

    multiply = steps(BK, WMITER, WNITER, WSUBM, WSUBN, TM, TN)
    write_back = tile_writer(WMITER, WNITER, WSUBM, WSUBN, TM, TN)
    place = thread_place(BM, BN, WM, WN, TM, TN, GROUP, WARPS_N, WARP_ROWS, TCOLS)

    def sgemm_warptile(a, b, c):
        As0 = cuda.shared.array(A_SHAPE, float32)
        Bs0 = cuda.shared.array(B_SHAPE, float32)
        As1 = cuda.shared.array(A_SHAPE, float32)
        Bs1 = cuda.shared.array(B_SHAPE, float32)
        acc = cuda.local.array((AM, AN), float32)
        a_frag = cuda.local.array((2, AM), float32)
        b_frag = cuda.local.array((2, AN), float32)
        a_regs = cuda.local.array(A_REGS, float32)
        b_regs = cuda.local.array(B_REGS, float32)
        m, k, n = uint64(a.shape[0]), uint64(a.shape[1]), uint64(b.shape[1])

        row0, col0, row, col, tid = place(m, n)
        a_tile_row, a_tile_col = tid // BK, tid % BK
        b_tile_row, b_tile_col = tid // BN, tid % BN

        for i in range(AM):
            for j in range(AN):
                acc[i, j] = float32(0)
        inside = row0 + BM <= m and col0 + BN <= n
        tiles_k = (k + BK - ONE) // BK

        load(a, b, a_regs, b_regs, row0 + a_tile_row, a_tile_col, b_tile_row, col0 + b_tile_col, m, n, k,
             not inside or BK > k)
        store(As0, Bs0, a_regs, b_regs, a_tile_row, a_tile_col, b_tile_row, b_tile_col)
        cuda.syncthreads()
        for t in range(ZERO, tiles_k, U(2)):
            for half in range(U(2)):  # unrolled: buffer 0 then buffer 1, so addresses stay constant
                step = t + half
                if step < tiles_k:
                    following = step + ONE < tiles_k
                    if following:
                        k0 = (step + ONE) * BK
                        load(a, b, a_regs, b_regs, row0 + a_tile_row, k0 + a_tile_col, k0 + b_tile_row,
                             col0 + b_tile_col, m, n, k, not inside or k0 + BK > k)
                    if half == ZERO:
                        multiply(As0, Bs0, acc, a_frag, b_frag, row, col)
                        if following:
                            store(As1, Bs1, a_regs, b_regs, a_tile_row, a_tile_col, b_tile_row, b_tile_col)
                    else:
                        multiply(As1, Bs1, acc, a_frag, b_frag, row, col)
                        if following:
                            store(As0, Bs0, a_regs, b_regs, a_tile_row, a_tile_col, b_tile_row, b_tile_col)
                    cuda.syncthreads()

        write_back(c, acc, row0 + row, col0 + col, m, n)

    return sgemm_warptile


def thread_place(BM, BN, WM, WN, TM, TN, GROUP, WARPS_N, WARP_ROWS, TCOLS):
    """place(m, n) -> (row0, col0, row, col, tid): the block's tile of C in grouped order (consecutive blocks walk
    down GROUP block-rows before moving right), where this thread's sub-tiles start in it (thread (x, y) of warp z),
    and the thread's index in the block. Every argument unsigned."""
    ONE = U(1)

    @cuda.jit(device=True, inline="always")
    def place(m, n):
        tiles_m, tiles_n = (m + BM - ONE) // BM, (n + BN - ONE) // BN
        block = uint64(cuda.blockIdx.x)
        first = (block // (GROUP * tiles_n)) * GROUP
        rows_in_group = min(tiles_m - first, GROUP)
        row0 = (first + block % rows_in_group) * BM
        col0 = (block % (GROUP * tiles_n)) // rows_in_group * BN
        x, y, z = uint64(cuda.threadIdx.x), uint64(cuda.threadIdx.y), uint64(cuda.threadIdx.z)
        row = (z // WARPS_N) * WM + y * TM
        col = (z % WARPS_N) * WN + x * TN
        return row0, col0, row, col, (z * WARP_ROWS + y) * TCOLS + x

    return place


def tile_writer(WMITER, WNITER, WSUBM, WSUBN, TM, TN):
    """write_back(c, acc, row, col, m, n): a thread's accumulators to C, its WMITER×WNITER sub-tiles of TM×TN from
    (row, col), inside the matrix (every argument unsigned: uint64 with int64 would make a float64)."""
    @cuda.jit(device=True, inline="always")
    def write_back(c, acc, row, col, m, n):
        for wi in range(WMITER):
            for i in range(TM):
                out_row = row + wi * WSUBM + i
                if out_row < m:
                    for wj in range(WNITER):
                        for j in range(TN):
                            out_col = col + wj * WSUBN + j
                            if out_col < n:
                                c[out_row, out_col] = acc[wi * TM + i, wj * TN + j]

    return write_back

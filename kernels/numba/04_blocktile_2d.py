"""A TM×TN register tile per thread (`cuda.local.array` of constant shape), A transposed in shared memory.

Each thread keeps TM×TN accumulators and, per k, reads TM values of A and TN of B into registers and adds
their outer product. The tile sizes are closure constants, so Numba compiles them in and NVVM unrolls the
loops over them; the accumulators then live in registers, not in local memory. A's tile is stored
transposed (k-major) with 4 floats of padding per row, so a thread's TM values of A are contiguous.
This is the kernel as one would first write it in Numba: signed indices, one buffer, a check per load.
"""
from numba import cuda, float32


def make(BM, BN, BK, TM, TN):
    TX = BN // TN  # threads along a row of the block tile
    THREADS = TX * (BM // TM)
    A_SHAPE, B_SHAPE = (BK, BM + 4), (BK, BN)

    def sgemm_blocktile_2d(a, b, c):
        a_tile = cuda.shared.array(A_SHAPE, float32)
        b_tile = cuda.shared.array(B_SHAPE, float32)
        acc = cuda.local.array((TM, TN), float32)
        a_frag = cuda.local.array(TM, float32)
        b_frag = cuda.local.array(TN, float32)
        m, k = a.shape
        n = b.shape[1]
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        tid = ty * TX + tx
        row0, col0 = cuda.blockIdx.y * BM, cuda.blockIdx.x * BN
        for i in range(TM):
            for j in range(TN):
                acc[i, j] = float32(0)
        for k0 in range(0, k, BK):
            for e in range(tid, BM * BK, THREADS):  # consecutive threads read along a row of A
                r, q = e // BK, e % BK
                a_tile[q, r] = a[row0 + r, k0 + q] if row0 + r < m and k0 + q < k else float32(0)
            for e in range(tid, BK * BN, THREADS):
                r, q = e // BN, e % BN
                b_tile[r, q] = b[k0 + r, col0 + q] if k0 + r < k and col0 + q < n else float32(0)
            cuda.syncthreads()
            for p in range(BK):
                for i in range(TM):
                    a_frag[i] = a_tile[p, ty * TM + i]
                for j in range(TN):
                    b_frag[j] = b_tile[p, tx * TN + j]
                for i in range(TM):
                    for j in range(TN):
                        acc[i, j] += a_frag[i] * b_frag[j]
            cuda.syncthreads()
        for i in range(TM):
            for j in range(TN):
                row, col = row0 + ty * TM + i, col0 + tx * TN + j
                if row < m and col < n:
                    c[row, col] = acc[i, j]

    return sgemm_blocktile_2d

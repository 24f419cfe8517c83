"""TPB×TPB tiles of A and B staged in shared memory (`cuda.shared.array`), one output per thread.

The Numba documentation's `fast_matmul`, with the tile loop running over k (not the grid width) and zeros
loaded past the edges, so any shape works.
"""
from numba import cuda, float32


def make(TPB):
    def sgemm_shared_tiles(a, b, c):
        a_tile = cuda.shared.array((TPB, TPB), float32)
        b_tile = cuda.shared.array((TPB, TPB), float32)
        col, row = cuda.grid(2)
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        m, k = a.shape
        n = b.shape[1]
        total = float32(0)
        for k0 in range(0, k, TPB):
            a_tile[ty, tx] = a[row, k0 + tx] if row < m and k0 + tx < k else float32(0)
            b_tile[ty, tx] = b[k0 + ty, col] if k0 + ty < k and col < n else float32(0)
            cuda.syncthreads()
            for p in range(TPB):
                total += a_tile[ty, p] * b_tile[p, tx]
            cuda.syncthreads()
        if row < m and col < n:
            c[row, col] = total

    return sgemm_shared_tiles

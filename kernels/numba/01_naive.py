"""One thread per output, `cuda.grid(2)`: x runs down a column of C, so a warp's loads of A are strided."""
from numba import cuda, float32


def make():
    def sgemm_naive(a, b, c):
        row, col = cuda.grid(2)
        if row < c.shape[0] and col < c.shape[1]:
            total = float32(0)
            for p in range(a.shape[1]):
                total += a[row, p] * b[p, col]
            c[row, col] = total

    return sgemm_naive

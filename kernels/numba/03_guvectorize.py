"""`guvectorize(target="cuda")` with the core signature (m,k),(k,n)->(m,n).

A generalized ufunc runs one thread per element of its loop dimensions; a single product has none, so the
whole multiplication runs in one GPU thread. That is the lesson of this rung: it only pays with a batch.
"""
from numba import float32

SIGNATURE = "void(float32[:, :], float32[:, :], float32[:, :])"
LAYOUT = "(m,k),(k,n)->(m,n)"


def product(a, b, c):
    for i in range(a.shape[0]):
        for j in range(b.shape[1]):
            total = float32(0)
            for p in range(a.shape[1]):
                total += a[i, p] * b[p, j]
            c[i, j] = total

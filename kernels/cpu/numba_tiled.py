"""A cache-tiled SGEMM with Numba's njit(parallel=True): output tiles spread over the cores."""
from __future__ import annotations

import time

from kernels.registry import Built

SIGNATURE = "void(float32[:, ::1], float32[:, ::1], float32[:, ::1], int64, int64, int64)"
_kernel = None


def _compile():
    import numba
    import numpy as np

    @numba.njit(SIGNATURE, parallel=True, cache=True)
    def tiled(a, b, c, tile_m, tile_n, tile_k):
        m, k = a.shape
        n = b.shape[1]
        tiles_n = (n + tile_n - 1) // tile_n
        for t in numba.prange(((m + tile_m - 1) // tile_m) * tiles_n):
            i0 = (t // tiles_n) * tile_m
            j0 = (t % tiles_n) * tile_n
            i1 = min(i0 + tile_m, m)
            j1 = min(j0 + tile_n, n)
            acc = np.zeros((tile_m, tile_n), dtype=np.float32)
            for p0 in range(0, k, tile_k):
                for i in range(i0, i1):
                    for p in range(p0, min(p0 + tile_k, k)):
                        a_ip = a[i, p]
                        for j in range(j0, j1):  # contiguous in b and acc: vectorises
                            acc[i - i0, j - j0] += a_ip * b[p, j]
            for i in range(i0, i1):
                for j in range(j0, j1):
                    c[i, j] = acc[i - i0, j - j0]

    return tiled


def build(mode, params, cache_dir):
    global _kernel
    start = time.perf_counter()
    _kernel = _kernel or _compile()
    return Built((_kernel, params["tile_m"], params["tile_n"], params["tile_k"]),
                 {"compile_s": time.perf_counter() - start, "parallel": True})


def run(artifact, a, b, c, stream):
    kernel, tile_m, tile_n, tile_k = artifact
    kernel(a, b, c, tile_m, tile_n, tile_k)

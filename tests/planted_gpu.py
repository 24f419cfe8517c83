"""Planted faulty GPU variants (registered through config `variant_modules`): each must be caught on the GPU."""
import functools

from kernels.registry import Built, Variant, register
from tests.planted import HalfOnceWarm, PointerCache, RareRace, RareSwap, tf32_rounded

# A plain kernel for the cheats that need one: rows [0, rows) of C = A·B, a thread per element; `go`, if given, a
# device flag read first (0: do nothing); `next`, if given, a tile counter: blocks take rows from it in turn
# (a persistent kernel), and nothing resets it.
KERNELS = r"""
__device__ float dot(const float* a, const float* b, int n, int k, int i, int j) {
    float s = 0.f;
    for (int p = 0; p < k; ++p) s += a[i * k + p] * b[p * n + j];
    return s;
}
extern "C" __global__ void rows_gemm(const float* a, const float* b, float* c, int n, int k, int rows,
                                     const bool* go) {
    const int i = blockIdx.y, j = blockIdx.x * blockDim.x + threadIdx.x;
    if ((go && !*go) || i >= rows || j >= n) return;
    c[i * n + j] = dot(a, b, n, k, i, j);
}
extern "C" __global__ void persistent_gemm(const float* a, const float* b, float* c, int m, int n, int k,
                                           unsigned int* next) {
    __shared__ unsigned int row;
    for (;;) {
        if (threadIdx.x == 0) row = atomicAdd(next, 1u);
        __syncthreads();
        if (row >= (unsigned int)m) return;
        for (int j = threadIdx.x; j < n; j += blockDim.x) c[row * n + j] = dot(a, b, n, k, row, j);
        __syncthreads();
    }
}
"""


@functools.lru_cache(maxsize=None)
def _kernel(name):
    import cupy

    return cupy.RawModule(code=KERNELS).get_function(name)


def _rows_gemm(a, b, c, rows, go=None):
    import numpy as np

    n, k = b.shape[1], a.shape[1]
    _kernel("rows_gemm")(((n + 127) // 128, rows), (128,), (a, b, c, np.int32(n), np.int32(k), np.int32(rows), go))


def _build(mode, params, cache_dir):
    return Built(None, {"compile_s": 0.0})


def _other_stream(artifact, a, b, c, stream):
    """Right, but on a stream of its own: the harness's events around it would time nothing."""
    import cupy

    with cupy.cuda.Stream(non_blocking=True):
        cupy.matmul(a, b, out=c)


def _dropped_term(artifact, a, b, c, stream):
    """Right except one product term of a common size (the one nearest 0.1) missing from element (m/2, n/2)."""
    import cupy

    cupy.matmul(a, b, out=c)
    i, j = a.shape[0] // 2, b.shape[1] // 2
    terms = a[i, :] * b[:, j]
    c[i, j] -= terms[int(cupy.argmin(cupy.abs(cupy.abs(terms) - 0.1)))]


def _skips_once_warm(artifact, a, b, c, stream, calls={}):
    """Right on its first calls with an output (as many as validation makes), then does nothing."""
    import cupy

    key = (c.data.ptr, c.shape)
    calls[key] = calls.get(key, 0) + 1
    if calls[key] <= 2:
        cupy.matmul(a, b, out=c)


def _past_the_end(artifact, a, b, c, stream):
    """Right, and one element more: a store just past the end of C, where the memory pool would have slack."""
    import cupy

    cupy.matmul(a, b, out=c)
    cupy.ndarray((1,), dtype=c.dtype, memptr=c.data + c.nbytes).fill(0)


def _tf32_inputs(artifact, a, b, c, stream):
    """A and B rounded to TF32's 10-bit mantissa, as tensor cores read them: not an fp32 product."""
    import cupy

    cupy.matmul(tf32_rounded(a, cupy), tf32_rounded(b, cupy), out=c)


def _matmul(a, b, out):
    import cupy

    cupy.matmul(a, b, out=out)


def _unobserved(artifact, a, b, c, stream):
    """Computes only while the output holds the poison, judged on the device from its first element; otherwise
    returns at once."""
    import cupy

    _rows_gemm(a, b, c, c.shape[0], cupy.isnan(c[0, 0]))


def _unreset_counter(artifact, a, b, c, stream, counters={}):
    """A persistent kernel whose tile counter is made once and never reset: later launches find no rows left."""
    import cupy
    import numpy as np

    if c.shape not in counters:
        counters[c.shape] = cupy.zeros(1, dtype=cupy.uint32)
    m, n = c.shape
    _kernel("persistent_gemm")((132,), (128,), (a, b, c, np.int32(m), np.int32(n), np.int32(a.shape[1]),
                                                counters[c.shape]))


def _side_after_event(artifact, a, b, c, stream, side=[]):
    """The product on a side stream that waits for an event of the harness's stream, never joined back: the
    harness's stop event does not wait for it."""
    import cupy

    if not side:
        side.append(cupy.cuda.Stream(non_blocking=True))
    ready = cupy.cuda.Event()
    ready.record(stream)
    side[0].wait_event(ready)
    side[0].use()
    try:
        cupy.matmul(a, b, out=c)
    finally:
        stream.use()


CHEATS = {"planted-unobserved": _unobserved,
          "planted-half-once-warm": HalfOnceWarm(lambda a, b, c, rows: _rows_gemm(a, b, c, rows)),
          "planted-pointer-cache": PointerCache(lambda c, kept: c.__setitem__(Ellipsis, kept), _matmul,
                                                lambda x: x.data.ptr),
          "planted-rare-swap": RareSwap(_matmul), "planted-unreset-counter": _unreset_counter,
          "planted-side-after-event": _side_after_event}


for name, run in {"planted-other-stream": _other_stream, "planted-dropped-term": _dropped_term,
                  "planted-skips-once-warm": _skips_once_warm, "planted-past-the-end": _past_the_end,
                  "planted-tf32-inputs": _tf32_inputs, "planted-rare-race": RareRace(_matmul), **CHEATS}.items():
    register(Variant(family="cupy", name=name, device="cuda", modes=("fp32",), build=_build, run=run,
                     description=f"test fault injection on the GPU: {run.__doc__}"))

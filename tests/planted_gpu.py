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
    """Right except one product term of a typical size for its element (the median one) missing from element
    (m/2, n/2)."""
    import cupy

    cupy.matmul(a, b, out=c)
    i, j = a.shape[0] // 2, b.shape[1] // 2
    terms = a[i, :] * b[:, j]
    c[i, j] -= terms[cupy.argsort(cupy.abs(terms))[terms.size // 2]]


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


CACHE_KERNELS = r"""
extern "C" __global__ void content_hash(const unsigned int* a, unsigned long long na, const unsigned int* b,
                                        unsigned long long nb, unsigned long long* hash) {
    // the inputs' bits with their signs cleared (a negated copy hashes alike), summed in an order-free way
    unsigned long long acc = 0;
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < na + nb;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        unsigned long long z = ((i < na ? a[i] : b[i - na]) & 0x7FFFFFFFu) * 0x9E3779B97F4A7C15ull + i;
        acc += (z ^ (z >> 29)) * 0xBF58476D1CE4E5B9ull;
    }
    for (int offset = 16; offset; offset >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, offset);
    if ((threadIdx.x & 31) == 0) atomicAdd(hash, acc);
}
extern "C" __global__ void replay(const unsigned long long* hash, const unsigned long long* kept_hash,
                                  const float* kept, float* c, unsigned long long n, bool* compute) {
    const bool hit = *hash == *kept_hash;
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) if (hit) c[i] = kept[i];
    if (blockIdx.x == 0 && threadIdx.x == 0) *compute = !hit;
}
extern "C" __global__ void keep(const unsigned long long* hash, unsigned long long* kept_hash, const float* c,
                                float* kept, unsigned long long n, const bool* computed) {
    if (!*computed) return;
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) kept[i] = c[i];
    if (blockIdx.x == 0 && threadIdx.x == 0) *kept_hash = *hash;
}
"""


class _ContentCache:
    """Hashes its inputs on the device in O(n²) and replays the product kept for that hash (a copy, or the same
    inputs negated, hit it), else computes and keeps it, all queued on the stream, never waiting: with fresh inputs
    before every timed launch it never hits, so it is timed with its work."""

    def __init__(self):
        self.state = {}

    def __call__(self, artifact, a, b, c, stream):
        import cupy
        import numpy as np

        if c.shape not in self.state:
            self.state[c.shape] = (cupy.zeros(1, cupy.uint64), cupy.full(1, 1, cupy.uint64), cupy.empty_like(c),
                                   cupy.zeros(1, cupy.bool_))
        hashed, kept_hash, kept, compute = self.state[c.shape]
        module = _cache_module()
        hashed.fill(0)
        module.get_function("content_hash")((264,), (256,), (a, np.uint64(a.size), b, np.uint64(b.size), hashed))
        module.get_function("replay")((264,), (256,), (hashed, kept_hash, kept, c, np.uint64(c.size), compute))
        _rows_gemm(a, b, c, c.shape[0], compute)
        module.get_function("keep")((264,), (256,), (hashed, kept_hash, c, kept, np.uint64(c.size), compute))


@functools.lru_cache(maxsize=None)
def _cache_module():
    import cupy

    return cupy.RawModule(code=CACHE_KERNELS)


def _later_launch(artifact, a, b, c, stream, calls={}, pending=[]):
    """Right on its first calls at a shape (as many as validation makes); then each launch computes the product the
    launch before it was given, into that launch's output: every launch's work is left to the next."""
    calls[c.shape] = calls.get(c.shape, 0) + 1
    if calls[c.shape] <= 2:
        _matmul(a, b, c)
        return
    if pending:
        _matmul(*pending.pop())
    pending.append((a, b, c))


def _reference_writer(artifact, a, b, c, stream):
    """A quarter of the product, then its output written over the harness's fp64 references of this shape (found by
    the garbage collector, wherever the worker keeps them)."""
    import gc

    k = a.shape[1] // 4 or 1
    _matmul(a[:, :k], b[:k], c)
    for found in gc.get_objects():
        if type(found).__name__ == "References":
            for pair, _ in found.kept.values():
                if pair[0].shape == c.shape:
                    pair[0][...] = c


SPIN_KERNEL = r"""
extern "C" __global__ void spin(unsigned long long ns) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now)); } while (now - start < ns);
}
"""


def _leaves_kernel(artifact, a, b, c, stream, side=[]):
    """Right, and after each product a kernel that spins for five seconds on a stream of its own (a block on every SM
    of an H100), never waited for: the last one runs on into whatever is measured next."""
    import cupy
    import numpy as np

    _matmul(a, b, c)
    if not side:
        side.append(cupy.cuda.Stream(non_blocking=True))
    cupy.RawKernel(SPIN_KERNEL, "spin")((132,), (256,), (np.uint64(5 * 10**9),), stream=side[0])


def _bf16_composed(artifact, a, b, c, stream):
    """An 'fp32' product from BF16 pieces: three BF16 products summed in FP32."""
    import cupy

    from tests.planted import bf16_split

    (ah, al), (bh, bl) = bf16_split(a, cupy), bf16_split(b, cupy)
    cupy.matmul(ah, bh, out=c)
    c += ah @ bl + al @ bh


CHEATS = {"planted-unobserved": _unobserved,
          "planted-half-once-warm": HalfOnceWarm(lambda a, b, c, rows: _rows_gemm(a, b, c, rows)),
          "planted-pointer-cache": PointerCache(lambda c, kept: c.__setitem__(Ellipsis, kept), _matmul,
                                                lambda x: x.data.ptr),
          "planted-rare-swap": RareSwap(_matmul), "planted-unreset-counter": _unreset_counter,
          "planted-side-after-event": _side_after_event, "planted-content-cache": _ContentCache(),
          "planted-later-launch": _later_launch, "planted-reference-writer": _reference_writer,
          "planted-leaves-kernel": _leaves_kernel, "planted-bf16-composed": _bf16_composed}


for name, run in {"planted-other-stream": _other_stream, "planted-dropped-term": _dropped_term,
                  "planted-skips-once-warm": _skips_once_warm, "planted-past-the-end": _past_the_end,
                  "planted-tf32-inputs": _tf32_inputs, "planted-rare-race": RareRace(_matmul), **CHEATS}.items():
    register(Variant(family="cupy", name=name, device="cuda", modes=("fp32",), build=_build, run=run,
                     description=f"test fault injection on the GPU: {run.__doc__}"))

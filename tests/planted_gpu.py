"""Planted faulty GPU variants (registered through config `variant_modules`): each must be caught on the GPU."""
from kernels.registry import Built, Variant, register
from tests.planted import RareRace, tf32_rounded


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


for name, run in {"planted-other-stream": _other_stream, "planted-dropped-term": _dropped_term,
                  "planted-skips-once-warm": _skips_once_warm, "planted-past-the-end": _past_the_end,
                  "planted-tf32-inputs": _tf32_inputs, "planted-rare-race": RareRace(_matmul)}.items():
    register(Variant(family="cupy", name=name, device="cuda", modes=("fp32",), build=_build, run=run,
                     description=f"test fault injection on the GPU: {run.__doc__}"))

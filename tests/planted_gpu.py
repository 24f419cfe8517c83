"""Planted faulty GPU variants (registered through config `variant_modules`): each must be caught on the GPU."""
from kernels.registry import Built, Variant, register


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


for name, run in {"planted-other-stream": _other_stream, "planted-dropped-term": _dropped_term,
                  "planted-skips-once-warm": _skips_once_warm}.items():
    register(Variant(family="cupy", name=name, device="cuda", modes=("fp32",), build=_build, run=run,
                     description=f"test fault injection on the GPU: {run.__doc__}"))

"""A family of its own from outside kernels/ (config `variant_modules: [tests.toy_family]`): NumPy's product under the
family name "toy", as a user would add a library the harness has never heard of."""
import numpy as np

from kernels.registry import Built, Variant, register

register(Variant(family="toy", name="numpy-matmul", device="cpu", modes=("fp32",),
                 build=lambda mode, params, cache_dir: Built(None, {"compile_s": 0.0}),
                 run=lambda artifact, a, b, c, stream: np.matmul(a, b, out=c),
                 description="a family registered from outside kernels/"))

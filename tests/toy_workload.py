"""A workload of its own from one module outside gemmbench/ (config `variant_modules: [tests.toy_workload]`): the
matrix-vector product y = A·x, with a NumPy variant of family "toy", as a user would add batched GEMM."""
import numpy as np

from gemmbench import workloads
from gemmbench.present import views
from kernels.registry import Built, Variant, register

workloads.register(workloads.Workload(
    "gemv", ("m", "k"),
    operands=lambda d: [(d["m"], d["k"]), (d["k"], 1)],
    output=lambda d: (d["m"], 1),
    reference=lambda xp, ops: xp.matmul(ops[0], ops[1]),
    scale=lambda xp, ops, product: xp.sqrt(product(ops[0] ** 2, ops[1] ** 2)),
    flops=lambda d: 2.0 * d["m"] * d["k"],
    formula="2·m·k; minimum bytes = 4 · (mk + k + m)",
    sweep=lambda config: [(n, n) for n in config["square_sizes"]],
    listed=lambda config: [[7, 13]],
    just=lambda d: {"square_sizes": [d["m"]]},
    config_keys={"sweep": ("square_sizes",), "listed": ()}))
views.register(views.View("gemv", figures=("tflops_vs_size", "validation_error"), compared=(),
                          position=lambda d: np.sqrt(d["m"] * d["k"])))

register(Variant(family="toy", name="numpy-gemv", device="cpu", modes=("fp32",), workload="gemv",
                 build=lambda mode, params, cache_dir: Built(None, {"compile_s": 0.0}),
                 run=lambda artifact, a, x, y, stream: np.matmul(a, x, out=y),
                 description="a workload and its variant registered from one module outside the harness"))

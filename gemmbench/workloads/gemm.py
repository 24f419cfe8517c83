"""gemm: C = A·B, shapes (m, n, k): A m×k, B k×n, C m×n. The sweep is square (config `sizes`), the awkward shapes
are listed in `validation_shapes`."""
from __future__ import annotations

import numpy as np

from gemmbench.workloads import Workload

WORKLOAD = Workload(
    "gemm", ("m", "n", "k"),
    operands=lambda d: [(d["m"], d["k"]), (d["k"], d["n"])],
    output=lambda d: (d["m"], d["n"]),
    reference=lambda xp, ops: xp.matmul(ops[0], ops[1]),
    scale=lambda xp, ops: xp.sqrt(xp.matmul(ops[0] ** 2, ops[1] ** 2)),
    flops=lambda d: 2.0 * d["m"] * d["n"] * d["k"],
    formula="2·m·n·k; minimum bytes = 4 · (mk + kn + mn), with bf16 operands 2 · (mk + kn) + 4 · mn",
    figures=("ladder", "tflops_vs_size", "pct_of_baseline", "roofline", "validation_error"),
    compared=("ladder", "pct_of_baseline"),
    # the cube root of m·n·k: n for a square shape, an awkward shape placed by its volume
    position=lambda d: np.cbrt(d["m"] * d["n"] * d["k"]), speedups=False,
    sweep=lambda config: [(n, n, n) for n in config["sizes"]],
    listed=lambda config: config["validation_shapes"],
    config_keys={"sweep": ("sizes",), "listed": ("validation_shapes",)},
    # a square shape is the sweep; any other is validated as an awkward one and timed as the sweep's only point
    just=lambda d: {"sizes": [d["m"]], "validation_shapes": []} if d["m"] == d["n"] == d["k"] else
    {"sizes": [1], "validation_shapes": [[d["m"], d["n"], d["k"]]]})

"""gemm: C = A·B, shapes (m, n, k): A m×k, B k×n, C m×n. The sweep is the `square_sizes` and any listed `shapes`;
the awkward shapes, validated only, are listed in `validation_shapes`."""
from __future__ import annotations

from gemmbench.workloads import Workload

WORKLOAD = Workload(
    "gemm", ("m", "n", "k"),
    operands=lambda d: [(d["m"], d["k"]), (d["k"], d["n"])],
    output=lambda d: (d["m"], d["n"]),
    reference=lambda xp, ops: xp.matmul(ops[0], ops[1]),
    scale=lambda xp, ops, product: xp.sqrt(product(ops[0] ** 2, ops[1] ** 2)),
    flops=lambda d: 2.0 * d["m"] * d["n"] * d["k"],
    formula="2·m·n·k; minimum bytes = 4 · (mk + kn + mn), with bf16 operands 2 · (mk + kn) + 4 · mn",
    sweep=lambda config: [(n, n, n) for n in config["square_sizes"]]
    + [tuple(s) for s in config["shapes"] if not s[0] == s[1] == s[2] in config["square_sizes"]],
    listed=lambda config: config["validation_shapes"],
    config_keys={"sweep": ("square_sizes", "shapes"), "listed": ("validation_shapes",)},
    # the shape itself is the sweep's only point: validated and timed
    just=lambda d: {"square_sizes": [], "shapes": [[d["m"], d["n"], d["k"]]], "validation_shapes": []})

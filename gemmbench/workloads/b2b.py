"""b2b: D = (A0·B0)·B1, shapes (m, k0, n0, n1): A0 m×k0, B0 k0×n0, B1 n0×n1, D m×n1. The m×n0 intermediate
A1 = A0·B0 is not an operand: a fused variant never writes it, so the minimum traffic leaves it out. The sweep is
every combination of the config's `b2b` axes (its figure and report tables: gemmbench/present/views/b2b.py)."""
from __future__ import annotations

import itertools

from gemmbench.workloads import Workload

WORKLOAD = Workload(
    "b2b", ("m", "k0", "n0", "n1"),
    operands=lambda d: [(d["m"], d["k0"]), (d["k0"], d["n0"]), (d["n0"], d["n1"])],
    output=lambda d: (d["m"], d["n1"]),
    reference=lambda xp, ops: xp.matmul(xp.matmul(ops[0], ops[1]), ops[2]),
    scale=lambda xp, ops, product: xp.sqrt(product(product(ops[0] ** 2, ops[1] ** 2), ops[2] ** 2)),
    flops=lambda d: 2.0 * d["m"] * d["k0"] * d["n0"] + 2.0 * d["m"] * d["n0"] * d["n1"],
    formula="2·m·k0·n0 + 2·m·n0·n1 (both products); minimum bytes = 4 · (m·k0 + k0·n0 + n0·n1 + m·n1), "
            "without the m×n0 intermediate",
    sweep=lambda config: list(itertools.product(*(config["b2b"][a] for a in ("m", "k0", "n0", "n1")))),
    listed=lambda config: config["b2b"]["validation_shapes"], config_keys={"sweep": ("b2b",), "listed": ("b2b",)},
    reduction=lambda d: int(d["k0"]) + int(d["n0"]),  # the first product's error is carried into the second's
    just=lambda d: {"b2b": {**{axis: [size] for axis, size in d.items()}, "validation_shapes": []}})

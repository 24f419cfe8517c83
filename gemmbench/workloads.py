"""What is computed, apart from how: each workload names its shape axes, operands, fp64 reference and cost.

gemm: C = A·B          (m, n, k):      A m×k, B k×n, C m×n
b2b:  D = (A0·B0)·B1   (m, k0, n0, n1): A0 m×k0, B0 k0×n0, B1 n0×n1, D m×n1; the m×n0 intermediate A1 = A0·B0 is
      not an operand: a fused variant never writes it, so the minimum traffic leaves it out.
A variant declares its workload; it is run as run(artifact, *operands, out).
Every array is float32 in storage; the formulas below work on ints and on pandas columns alike.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

ELEMENT_BYTES = 4
SHAPE_COLUMNS = ("m", "n", "k", "k0", "n0", "n1")  # every workload's axes, as table columns


@dataclass(frozen=True)
class Workload:
    name: str
    axes: tuple[str, ...]
    operands: Callable[[dict], list[tuple]]  # shapes of the inputs, in run() order
    output: Callable[[dict], tuple]
    reference: Callable[[object, list], object]  # (xp, float64 operands) -> float64 result
    # (xp, float64 operands) -> per output element, the root-sum-square of the products summed into it: rounding
    # errors grow with it, so an element's error is judged against its own (not the largest element's)
    scale: Callable[[object, list], object]
    flops: Callable[[dict], object]
    formula: str  # FLOPs and minimum bytes in words, for the report's methodology
    figures: tuple[str, ...]  # the report's figures for a run of this workload, in reading order
    compared: tuple[str, ...]  # those of them that compare with cuBLAS: drawn only where it runs
    position: Callable[[dict], object]  # (sizes) -> where a shape sits on the figures' size axis
    speedups: bool  # derived columns: speedups over the baseline and over the fastest unfused variant
    sweep: Callable[[dict], list[tuple]]  # (validated config) -> the sweep's shapes, sizes in axis order
    listed: Callable[[dict], list]  # (validated config) -> the awkward shapes it lists for this workload
    just: Callable[[dict], dict]  # (sizes) -> config overrides whose plan is that one shape (the CLI's `run`)

    def min_bytes(self, dims: dict):
        return ELEMENT_BYTES * sum(math.prod(s) for s in [*self.operands(dims), self.output(dims)])

    def label(self, dims: dict) -> str:
        return "x".join(str(int(dims[a])) for a in self.axes)

    def parse(self, label: str) -> dict:
        values = [int(x) for x in label.split("x")]
        if len(values) != len(self.axes):
            raise ValueError(f"shape {label!r}: a {self.name} shape has {len(self.axes)} sizes "
                             f"({'x'.join(self.axes)})")
        return dict(zip(self.axes, values))


WORKLOADS = {
    "gemm": Workload(
        "gemm", ("m", "n", "k"),
        operands=lambda d: [(d["m"], d["k"]), (d["k"], d["n"])],
        output=lambda d: (d["m"], d["n"]),
        reference=lambda xp, ops: xp.matmul(ops[0], ops[1]),
        scale=lambda xp, ops: xp.sqrt(xp.matmul(ops[0] ** 2, ops[1] ** 2)),
        flops=lambda d: 2.0 * d["m"] * d["n"] * d["k"],
        formula="2·m·n·k; minimum bytes = 4 · (mk + kn + mn)",
        figures=("ladder", "tflops_vs_size", "pct_of_cublas", "roofline", "validation_error"),
        compared=("ladder", "pct_of_cublas"),
        # the cube root of m·n·k: n for a square shape, an awkward shape placed by its volume
        position=lambda d: np.cbrt(d["m"] * d["n"] * d["k"]), speedups=False,
        sweep=lambda config: [(n, n, n) for n in config["sizes"]],
        listed=lambda config: config["validation_shapes"],
        # a square shape is the sweep; any other is validated as an awkward one and timed as the sweep's only point
        just=lambda d: {"sizes": [d["m"]], "validation_shapes": []} if d["m"] == d["n"] == d["k"] else
        {"sizes": [1], "validation_shapes": [[d["m"], d["n"], d["k"]]]}),
    "b2b": Workload(
        "b2b", ("m", "k0", "n0", "n1"),
        operands=lambda d: [(d["m"], d["k0"]), (d["k0"], d["n0"]), (d["n0"], d["n1"])],
        output=lambda d: (d["m"], d["n1"]),
        reference=lambda xp, ops: xp.matmul(xp.matmul(ops[0], ops[1]), ops[2]),
        scale=lambda xp, ops: xp.sqrt(xp.matmul(xp.matmul(ops[0] ** 2, ops[1] ** 2), ops[2] ** 2)),
        flops=lambda d: 2.0 * d["m"] * d["k0"] * d["n0"] + 2.0 * d["m"] * d["n0"] * d["n1"],
        formula="2·m·k0·n0 + 2·m·n0·n1 (both products); minimum bytes = 4 · (m·k0 + k0·n0 + n0·n1 + m·n1), "
                "without the m×n0 intermediate",
        figures=("b2b_speedup", "roofline", "validation_error"),
        compared=("b2b_speedup",),
        position=lambda d: d["m"], speedups=True,
        sweep=lambda config: list(itertools.product(*(config["b2b"][a] for a in ("m", "k0", "n0", "n1")))),
        listed=lambda config: config["b2b"]["validation_shapes"],
        just=lambda d: {"b2b": {**{axis: [size] for axis, size in d.items()}, "validation_shapes": []}}),
}


def get(name: str) -> Workload:
    return WORKLOADS[name]

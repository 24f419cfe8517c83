"""What is computed: a workload is one module of this package (gemm.py, b2b.py) defining WORKLOAD, with its shape
axes and sweep, operands, fp64 reference and cost. How it is shown (its figures, derived columns and report sections)
is its view, gemmbench/present/views/. The harness names no workload: it asks the one a row names.
A variant declares its workload; it is run as run(artifact, *operands, out, stream).
Operands are stored as the mode says (registry.OPERAND_DTYPE: float32, or bfloat16 bits), the output is float32;
the formulas work on ints and on pandas columns alike.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Mapping

import numpy as np

from gemmbench.plugins import Plugins
from kernels.registry import OPERAND_DTYPE

OUTPUT_BYTES = 4  # float32 in every mode
SHAPE_COLUMNS = ("m", "n", "k", "k0", "n0", "n1")  # every workload's axes, as table columns


@dataclass(frozen=True)
class Workload:
    name: str
    axes: tuple[str, ...]
    operands: Callable[[dict], list[tuple]]  # shapes of the inputs, in run() order
    output: Callable[[dict], tuple]
    reference: Callable[[object, list], object]  # (xp, float64 operands) -> float64 result
    # (xp, float64 operands, product) -> per output element, the root-sum-square of the products summed into it:
    # rounding errors grow with it, so an element's error is judged against its own (not the largest element's).
    # `product(a, b)` multiplies matrices of squares (Backend.nonnegative_product: on a GPU, on its tensor cores)
    scale: Callable[[object, list, Callable], object]
    flops: Callable[[dict], object]
    formula: str  # FLOPs and minimum bytes in words, for the report's methodology
    sweep: Callable[[dict], list[tuple]]  # (validated config) -> the sweep's shapes, sizes in axis order
    listed: Callable[[dict], list]  # (validated config) -> the awkward shapes it lists for this workload
    just: Callable[[dict], dict]  # (sizes) -> config overrides whose plan is that one shape (the CLI's `run`)
    # the config sections that sweep and listed read, by those names
    config_keys: Mapping[str, tuple[str, ...]]
    # (sizes) -> how many products are summed into an output element along its chain of products: with the mode, it
    # sets the error an honest result may have (measure/checking.py)
    reduction: Callable[[dict], int] = lambda d: int(d["k"])

    def min_bytes(self, dims: dict, mode: str = "fp32"):
        """Each operand read once and the output written once."""
        operand_bytes = np.dtype(OPERAND_DTYPE[mode]).itemsize
        return operand_bytes * sum(math.prod(s) for s in self.operands(dims)) + OUTPUT_BYTES * math.prod(
            self.output(dims))

    def label(self, dims: dict) -> str:
        return "x".join(str(int(dims[a])) for a in self.axes)

    def parse(self, label: str) -> dict:
        values = [int(x) for x in label.split("x")]
        if len(values) != len(self.axes):
            raise ValueError(f"shape {label!r}: a {self.name} shape has {len(self.axes)} sizes "
                             f"({'x'.join(self.axes)})")
        return dict(zip(self.axes, values))


# name -> Workload: every module of this package defines one (WORKLOAD); others `register` theirs
WORKLOADS = Plugins("is not registered", "a module named in variant_modules may register one")


def register(workload: Workload) -> Workload:
    """A workload defined outside this package (in a module the config's variant_modules names, beside its
    variants); its axes must be table columns (SHAPE_COLUMNS)."""
    unknown = set(workload.axes) - set(SHAPE_COLUMNS)
    if unknown:
        raise ValueError(f"workload {workload.name!r}: axes {sorted(unknown)} are not table columns {SHAPE_COLUMNS}")
    return WORKLOADS.register(workload)


WORKLOADS.load_package(__name__, __path__, "WORKLOAD", register)
get = WORKLOADS.get


def shape_text(row) -> str:
    """A table row's shape as people write it, its workload's axes joined by × (4096×64×256×64, whatever type the
    table's columns have)."""
    return "×".join(f"{float(getattr(row, axis)):.0f}" for axis in get(getattr(row, "workload")).axes)

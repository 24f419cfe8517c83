"""How gemm is shown: the ladders, TFLOP/s and % of cuBLAS against size, the roofline and the validation errors."""
from __future__ import annotations

import numpy as np

from gemmbench.present.views import View

VIEW = View("gemm", figures=("ladder", "tflops_vs_size", "pct_of_baseline", "roofline", "validation_error"),
            compared=("ladder", "pct_of_baseline"),
            # the cube root of m·n·k: n for a square shape, an awkward shape placed by its volume
            position=lambda d: np.cbrt(d["m"] * d["n"] * d["k"]))

"""What every ladder's rungs promise, checked alike for the CuPy and the Numba ladders: the launch covers every
output of any shape, at the defaults and at the committed tuned parameters (read through how each ladder says which
grid axis runs over rows), and the defaults are valid and the tuner's candidates valid and reproducible."""
from __future__ import annotations

import json
import math

import pytest
from test_cupy_kernels import committed_params

import kernels.cupy.variants
import kernels.numba.variants
from gemmbench.tuning import search
from kernels import registry
from kernels.tiles import cdiv


def _grid_kind(rung) -> str:
    """linear (one axis over every tile), rows_cols (the first axis over rows) or cols_rows."""
    if hasattr(rung, "grid_1d"):  # a CuPy rung
        return "linear" if rung.grid_1d else "rows_cols" if rung.rows_first else "cols_rows"
    return rung.grid


RUNGS = [(f"cupy/{r.name}", r) for r in kernels.cupy.variants.RUNGS] + \
    [(f"numba/{r.variant_name}", r) for r in kernels.numba.variants.RUNGS]
LADDERS = [(key, rung) for key, rung in RUNGS if not getattr(rung, "gufunc", False)]  # a gufunc has no launch


@pytest.mark.parametrize("key,rung", LADDERS, ids=[key for key, _ in LADDERS])
@pytest.mark.parametrize("shape", [(1, 1, 1), (33, 65, 17), (1000, 999, 1001), (4096, 96, 8192)])
def test_the_launch_covers_every_output(key, rung, shape):
    m, n, _ = shape
    for params in [rung.defaults, *committed_params(registry.load()[key])]:
        grid, block = rung.launch(params, m, n)
        rows, cols = rung.tile(params)
        assert math.prod(block) == rung.threads(params) <= 1024 and len(block) <= 3
        if _grid_kind(rung) == "linear":
            assert grid[0] == cdiv(m, rows) * cdiv(n, cols)
        else:
            gm, gn = grid[:2] if _grid_kind(rung) == "rows_cols" else grid[1::-1]
            assert (gm, gn) == (cdiv(m, rows), cdiv(n, cols))


@pytest.mark.parametrize("key,rung", RUNGS, ids=[key for key, _ in RUNGS])
def test_defaults_are_valid_and_candidates_are_reproducible(key, rung):
    variant = registry.load()[key]
    assert variant.check_params(rung.defaults) is None
    first = search.candidates(variant, rung.defaults, 12, seed=3)
    assert first == search.candidates(variant, rung.defaults, 12, seed=3)
    assert first[0] == rung.defaults and len({json.dumps(c, sort_keys=True) for c in first}) == len(first)
    assert all(variant.check_params(c) is None for c in first)

"""The Numba ladder without a GPU: every rung compiles to PTX for compute capability 9.0 (numba-cuda with the
NVVM wheel) and ptxas assembles it for sm_90 without spilling; every rung computes the right product under
Numba's CUDA simulator at tiny sizes; launches cover any shape; the build facts read PTX and SASS right."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT
from test_cupy_kernels import NVCC, committed_params

from kernels import registry
from kernels.numba.variants import RUNGS, SIGNATURE, limits, module, ptx_facts, sass_facts

KERNEL_RUNGS = [r for r in RUNGS if not r.gufunc]
VARIANTS = {r.variant_name: registry.load()[f"numba/{r.variant_name}"] for r in RUNGS}


def ptx_for_sm90(rung, params) -> str:
    from numba import cuda
    source = module(rung.file)
    if rung.gufunc:  # the gufunc's body, as the device function Numba wraps in its launch kernel
        return cuda.compile_ptx(source.product, source.SIGNATURE, device=True, cc=(9, 0))[0]
    return cuda.compile_ptx(source.make(**params), SIGNATURE, cc=(9, 0))[0]


@pytest.mark.parametrize("rung", RUNGS, ids=lambda r: r.variant_name)
def test_every_rung_compiles_to_ptx_for_cc90_and_assembles_without_spills(rung, tmp_path):
    for params in [rung.defaults, *committed_params(VARIANTS[rung.variant_name])]:
        ptx = ptx_for_sm90(rung, params)
        assert ".target sm_90" in ptx
        if rung.gufunc:
            continue
        assert ptx_facts(ptx)["ptx_fma"] > 0
        if "async_copy.py" in rung.builds_on:  # its copies are cp.async, not loads and stores through registers
            assert ptx_facts(ptx)["ptx_cp_async"] > 0 and "st.shared" not in ptx
        if NVCC:  # ptxas sits beside nvcc in the wheel
            (tmp_path / "k.ptx").write_text(ptx)
            done = subprocess.run([str(Path(NVCC).with_name("ptxas")), "-arch=sm_90", "-v", "-o",
                                   str(tmp_path / "k.cubin"), str(tmp_path / "k.ptx")], capture_output=True, text=True)
            assert done.returncode == 0, done.stderr[-2000:]
            assert "0 bytes spill stores" in done.stderr, (params, done.stderr)


SIMULATED_SHAPES = [(1, 1, 1), (7, 13, 5), (33, 65, 17), (64, 64, 64), (64, 3, 40)]


def _simulated_errors(cases: list[tuple[str, dict]]) -> list[dict]:
    """Run rungs under NUMBA_ENABLE_CUDASIM (set before numba.cuda is imported, hence a fresh process)."""
    script = f"""
import json, sys
import numpy as np
from numba import cuda
from kernels.numba.variants import RUNGS, SIGNATURE, module
rungs = {{r.variant_name: r for r in RUNGS}}
out = []
for name, params in json.loads(sys.argv[1]):
    rung, source = rungs[name], module(rungs[name].file)
    if rung.gufunc:  # the simulator cannot launch gufuncs: run the body in one simulated thread
        body = cuda.jit(device=True)(source.product)
        kernel = cuda.jit(lambda a, b, c: body(a, b, c))
    else:
        kernel = cuda.jit(source.make(**params))
    for m, n, k in {SIMULATED_SHAPES}:
        rng = np.random.default_rng(m * n * k)
        a = rng.random((m, k), dtype=np.float32) * 2 - 1
        b = rng.random((k, n), dtype=np.float32) * 2 - 1
        c = np.full((m, n), np.nan, np.float32)
        grid, block = ((1,), (1,)) if rung.gufunc else rung.launch(params, m, n)
        kernel[grid, block](a, b, c)
        ref = a.astype(np.float64) @ b
        out.append({{"rung": name, "shape": [m, n, k], "unwritten": int(np.isnan(c).sum()),
                     "max_error": float(np.nanmax(np.abs(c - ref)))}})
print(json.dumps(out))
"""
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", script, json.dumps(cases)], capture_output=True, text=True,
                          env=env, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.slow  # a minute on a 2-core machine: the simulator runs every thread in Python
def test_every_rung_is_correct_in_the_cuda_simulator():
    """Defaults, plus a second tile shape of the tuned rungs: edges cut through every tile."""
    cases = [(r.variant_name, dict(r.defaults)) for r in RUNGS]
    warptiles = {"BM": 64, "BN": 64, "BK": 8, "WM": 32, "WN": 32, "WMITER": 1, "WNITER": 1, "TM": 4, "TN": 8,
                 "GROUP": 4}
    cases += [("04_blocktile_2d", {"BM": 64, "BN": 64, "BK": 16, "TM": 4, "TN": 8}),
              ("05_warptile", warptiles), ("06_register_prefetch", warptiles),
              ("06_register_prefetch", {**warptiles, "BK": 16, "WN": 64, "WNITER": 2}),
              ("07_column_order", {**warptiles, "BK": 16, "WN": 64, "WNITER": 2}),  # more prefetch trips
              ("08_cp_async", {**warptiles, "STAGES": 2}), ("08_cp_async", {**warptiles, "STAGES": 4})]
    for case in cases:
        assert VARIANTS[case[0]].check_params(case[1]) is None, case
    results = _simulated_errors(cases)
    assert len(results) == len(cases) * len(SIMULATED_SHAPES)
    bad = [r for r in results if r["unwritten"] or r["max_error"] > 1e-5]
    assert not bad, bad


def test_the_gufunc_declares_its_size_limit():
    variant = VARIANTS["03_guvectorize"]
    assert variant.unsupported(256, 256, 256, {}) is None
    reason = variant.unsupported(257, 64, 64, {})
    assert reason and "one GPU thread" in reason and "256" in reason


def test_invalid_warp_tiles_are_named():
    rung = next(r for r in RUNGS if r.variant_name == "05_warptile")
    assert "32 thread tiles" in rung.problems({**rung.defaults, "TM": 8, "WM": 32})
    assert "multiples of 4" in rung.problems({**rung.defaults, "BM": 64, "BN": 64, "WM": 16, "WN": 32,
                                              "WMITER": 1, "WNITER": 1, "TM": 2, "TN": 8})


def test_build_facts_read_the_hot_loop_and_say_what_limits_numba():
    sass = """
        /*0000*/                   MOV R1, c[0x0][0x28] ;
.L_x_1:
        /*0010*/                   LDS.128 R4, [R2] ;
        /*0020*/                   FFMA R8, R4, R5, R8 ;
        /*0030*/                   FFMA R9, R4, R6, R9 ;
        /*0040*/                   FFMA R10, R4, R7, R10 ;
        /*0050*/               @P0 BRA `(.L_x_1) ;
        /*0060*/                   LDS R3, [R2] ;
        /*0070*/                   BRA 0x10 ;
"""
    facts = sass_facts(sass)
    assert facts["sass_hot_loop_instructions"] == 5 and facts["sass_hot_loop_ffma_share"] == 0.6
    assert facts["sass_hot_loop_lds128"] == 1 and facts["sass_hot_loop_lds32"] == 0
    ptx = "\tld.global.f32 \t%f1, [%rd1];\n\tfma.rn.f32 \t%f2, %f1, %f1, %f2;\n\tadd.s64 \t%rd2, %rd1, 4;\n"
    facts = {**ptx_facts(ptx), **facts}
    assert facts["ptx_fma"] == 1 and facts["ptx_global_loads_scalar"] == 1 and facts["ptx_int64_share"] == 1.0
    assert "scalar global loads" in limits(facts) and "64-bit" in limits(facts)
    assert "no cp.async" in limits(facts)
    inline = "\t{ .reg .u64 s; cvta.to.shared.u64 s, %rd1; cp.async.ca.shared.global [s], [%rd2], 4, %r1; }\n"
    assert ptx_facts(inline)["ptx_cp_async"] == 1 and "no cp.async" not in limits({**facts, **ptx_facts(inline)})


def test_each_parameter_set_of_a_rung_has_a_numba_cache_index_of_its_own(monkeypatch):
    """Numba rewrites a function's on-disk cache index whole, unlocked, so the compile-ahead workers that compile
    other parameter sets of one rung at once lost each other's entries (and could share a data file): each parameter
    set's kernel is named apart, and the same set keeps its name in every process."""
    from numba import cuda

    from kernels.numba import variants

    jitted, names = [], []
    monkeypatch.setattr(cuda, "jit", lambda *args, **kwargs: lambda function: jitted.append(function.__qualname__))
    rung = next(r for r in RUNGS if r.space)
    name, values = next(iter(rung.space.items()))
    first = dict(rung.defaults)
    other = {**first, name: next(v for v in values if v != first[name])}
    for params in (first, other, dict(first)):
        kernel = module(rung.file).make(**params)  # (its device functions are jitted here)
        variants._jit(kernel, params)
        names.append(jitted[-1])
    assert names[0] != names[1] and names[0] == names[2]


CLOSURE_DIGEST = """
import hashlib, json, sys
from numba.cuda.serialize import dumps
from kernels.numba.variants import RUNGS, module
for rung in RUNGS:
    if not rung.gufunc:
        closure = tuple(cell.cell_contents for cell in module(rung.file).make(**rung.defaults).__closure__ or ())
        print(json.dumps([rung.variant_name, hashlib.sha256(dumps(closure)).hexdigest()]))
"""


def test_every_rung_finds_its_numba_cache_entry_from_another_process():
    """Numba's cache index keys a kernel on its code and the pickled contents of its closure. An intrinsic pickles
    with a UUID of its process, so a kernel whose closure held one (rung 08's cp.async, through a device function)
    missed the cache in every other process and was compiled again in each measure job (seconds per size class).
    Two processes must pickle every rung's closure alike."""
    def digests():
        out = subprocess.run([sys.executable, "-c", CLOSURE_DIGEST], capture_output=True, text=True, check=True,
                             cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}).stdout
        return dict(json.loads(line) for line in out.splitlines())

    first, second = digests(), digests()
    assert len(first) == len(KERNEL_RUNGS)
    assert {name for name in first if first[name] != second[name]} == set()

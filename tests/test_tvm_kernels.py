"""The TVM family without a GPU: each schedule generates CUDA for sm_90 that nvcc compiles without spilling and
that NVRTC (with the include path the launch uses) accepts; the d2l tiling is correct on the CPU; the launch
read off the schedule covers every output."""
from __future__ import annotations

import functools
import importlib.util
import json
import re
from pathlib import Path

import numpy as np
import pytest

from kernels.tiles import cdiv
from kernels.tvm import variants
from tests.test_cupy_kernels import NVCC, assert_no_spills, nvcc_sm90

SM90 = variants.cuda_target("sm_90")
SHAPES = [(64, 64, 64), (128, 96, 160), (33, 65, 17)]


def params_for(file: str) -> dict:
    """A schedule's defaults; for the tuned schedule, a record (a sample of its space, as tuning would give)."""
    module = variants.schedule_module(file)
    return module.DEFAULTS if module.check(module.DEFAULTS) is None else sampled_cuda_record(5)


def source_for(file: str, shape, params=None) -> tuple[str, object]:
    params = params or params_for(file)
    sch = variants.scheduled(file, params, shape, SM90)
    return variants.cuda_source(sch, SM90, variants.pass_config(file, params)), sch


def run_on_cpu(sch, shape, target) -> None:
    """Build the schedule for `target` (a CPU) and check C = A @ B on fresh inputs against fp64 NumPy."""
    import tvm

    m, n, k = shape
    lib = tvm.compile(sch.mod, target=target)
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((m, k), np.float32), rng.standard_normal((k, n), np.float32)
    c = tvm.runtime.tensor(np.full((m, n), np.nan, np.float32))
    lib(tvm.runtime.tensor(a), tvm.runtime.tensor(b), c)
    np.testing.assert_allclose(c.numpy(), a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4 * np.sqrt(k))


# MetaSchedule's first use in a process imports TVM's tensor intrinsics: minutes on a 2-core machine
SCHEDULES = [pytest.param(f, marks=pytest.mark.slow) if "metaschedule" in f else f for f in variants.SCHEDULES]


@pytest.mark.skipif(NVCC is None, reason="no nvcc (requirements-test.txt installs one)")
@pytest.mark.parametrize("shape", [(1024, 1024, 1024), (33, 65, 17)], ids=str)
@pytest.mark.parametrize("file", SCHEDULES)
def test_every_schedule_compiles_for_sm90_without_spilling(file, shape, tmp_path):
    source, _ = source_for(file, shape)
    report = nvcc_sm90(source.splitlines(), (tmp_path,), tmp_path, Path(file).stem)
    assert re.findall(r"Compiling entry function '(\w+)'", report) == [variants.kernel_name(source)]
    assert_no_spills(report)


TIRX = variants.schedule_module("07_tirx_wgmma.py")


@functools.cache  # TVM's codegen: seconds a call on a 2-core machine
def tirx_source(mode: str = "bf16", file: str = "07_tirx_wgmma.py") -> str:
    return variants.tirx_source(file, variants.schedule_module(file).DEFAULTS, variants.cuda_target("sm_90a"), mode)


@pytest.mark.skipif(importlib.util.find_spec("cuda.bindings") is None, reason="no cuda-bindings (NVRTC)")
@pytest.mark.parametrize("file, mode", [pytest.param(*p.values, "fp32", marks=p.marks) if hasattr(p, "values")
                                         else (p, "fp32") for p in SCHEDULES]
                         + [(f, m) for f in variants.KERNELS
                            for m in variants.modes(f)])
def test_nvrtc_finds_the_headers_the_launch_needs(file, mode):
    """The run path compiles with cupy.RawModule, which needs a GPU; this is the same NVRTC with its options (for a
    TIRx kernel, also the tensor-map type that NVRTC lacks)."""
    from cuda.bindings import nvrtc

    tirx = variants.written_in_tirx(file)
    source = tirx_source(mode, file) if tirx else source_for(file, (33, 65, 17))[0]
    _, program = nvrtc.nvrtcCreateProgram(source.encode(), b"tvm.cu", 0, [], [])
    options = [o.encode() for o in (f"-arch=sm_90{'a' if tirx else ''}", *variants.nvrtc_options())]
    (result,) = nvrtc.nvrtcCompileProgram(program, len(options), options)
    _, size = nvrtc.nvrtcGetProgramLogSize(program)
    log = b" " * size
    nvrtc.nvrtcGetProgramLog(program, log)
    nvrtc.nvrtcDestroyProgram(program)
    assert result == nvrtc.nvrtcResult.NVRTC_SUCCESS, log.decode(errors="replace")[-3000:]


D2L = ["01_d2l.py", "02_d2l_vectorized.py"]


@pytest.mark.parametrize("shape", [*SHAPES, (256, 128, 64)], ids=str)  # the last is whole tiles: float4 fetches
@pytest.mark.parametrize("file", D2L)
def test_the_d2l_tiling_is_correct_on_the_cpu(file, shape):
    """The d2l schedules with their thread bindings left out (bind=False), built for llvm: the same padding,
    tiling, loop order, shared and local caches, vectorised loads and write-back as on the GPU, with the block and
    thread loops run serially. What it cannot check is what needs real threads: barriers and the cooperative
    fetch's division of work between threads (their loop extents are checked by the launch test below)."""
    module = variants.schedule_module(file)
    for params in (module.DEFAULTS, {"block_size": 8, "tx": 4, "ty": 8, "tk": 8}):
        run_on_cpu(variants.scheduled(file, params, shape, "llvm", bind=False), shape, "llvm")


def test_the_vectorised_d2l_reads_shared_memory_as_float4_in_its_source():
    """What 02 adds to 01, in TVM's generated CUDA: float4 shared arrays, register caches filled by float4 loads,
    and (whole tiles) float4 global loads; the book's schedule has none."""
    vectorised, _ = source_for("02_d2l_vectorized.py", (4096, 4096, 4096))
    book, _ = source_for("01_d2l.py", (4096, 4096, 4096))
    assert "*(float4*)(A_ptr" in vectorised and "*(float4*)(B_ptr" in vectorised
    assert re.search(r"\*\(float4\*\)\(A_shared_local_ptr", vectorised)
    assert "float4" not in book


@pytest.mark.parametrize("shape", [(1, 1, 1), (33, 65, 17), (1000, 999, 1001), (4096, 96, 8192)], ids=str)
@pytest.mark.parametrize("file", D2L)
def test_the_d2l_launch_covers_every_output(file, shape):
    """Grid and block as read off the schedule: BLOCK×BLOCK threads, one block per (BLOCK·TX)×(BLOCK·TY) tile,
    blockIdx.x over columns as in d2l."""
    m, n, _ = shape
    p = variants.schedule_module(file).DEFAULTS
    grid, block = variants.launch_dims(variants.scheduled(file, p, shape, SM90))
    assert block == (p["block_size"], p["block_size"], 1)
    assert grid == (cdiv(n, p["block_size"] * p["ty"]), cdiv(m, p["block_size"] * p["tx"]), 1)


@pytest.mark.parametrize("shape", [(1000, 999, 1001), (1, 1, 1), (1, 64, 64), (64, 1, 64)], ids=str)
def test_dlight_launch_matches_its_source(shape):
    """dlight chooses its own tiling (for vector products, another of its rules): its block's thread count is the
    kernel's __launch_bounds__."""
    source, sch = source_for("03_dlight.py", shape)
    grid, block = variants.launch_dims(sch)
    assert int(re.search(r"__launch_bounds__\((\d+)\)", source).group(1)) == block[0] * block[1] * block[2]
    assert all(g >= 1 for g in grid) and grid[2] == 1


@pytest.mark.skipif(NVCC is None, reason="no nvcc (requirements-test.txt installs one)")
@pytest.mark.parametrize("mode", TIRX.MODES)
def test_the_tirx_kernel_compiles_for_sm90a_to_wgmmas_fed_by_tma_without_spilling(tmp_path, mode):
    """One kernel for every shape (M, N, K its arguments), whose parameters are those its launch names, storing its
    accumulators in pairs (64-bit stores) where it may, from registers (no local memory); in TF32 with k_major beside
    it, which writes the K-major Bᵀ that TF32 wgmma reads."""
    from kernels import sass

    source = tirx_source(mode)
    report = nvcc_sm90(source.splitlines(), (tmp_path,), tmp_path, "tirx", arch="sm_90a")
    assert_no_spills(report)
    facts = sass.facts((tmp_path / "out.cubin").read_bytes())
    assert facts["sass_hgmma"] > 0 and facts["sass_tma"] > 0 and facts["sass_ffma"] == 0, facts
    stores = re.findall(r"\b(STG\.E[.\w]*|STL[.\w]*)", sass.sass_of((tmp_path / "out.cubin").read_bytes()))
    assert "STG.E.64" in stores and not any(s.startswith("STL") for s in stores), sorted(set(stores))
    kernels = variants.tirx_kernels("07_tirx_wgmma.py", TIRX.DEFAULTS, mode, source)
    assert sorted(kernels["main"]["parameters"]) == sorted(["a_map", "b_map", "C_ptr", "M", "N", "K", "tiles", "pairs"])
    helpers = {"k_major": ["B_ptr", "Bt_ptr", "K", "N", "ld", "tiles"]} if mode == "tf32" else {}
    assert {name: k["parameters"] for name, k in kernels.items() if name != "main"} == helpers


REGISTERS = variants.schedule_module("08_tirx_registers.py")


@pytest.mark.skipif(NVCC is None, reason="no nvcc (requirements-test.txt installs one)")
def test_the_registers_kernel_takes_wgmmas_a_from_registers_and_no_copy_of_b(tmp_path):
    """08: TF32 wgmma whose A operand is four registers (Bᵀ's fragments, loaded by the threads), fed by TMA, with no
    kernel beside it to transpose B; setmaxnreg gives the consumers their registers; nothing spills."""
    from kernels import sass

    source = tirx_source("tf32", "08_tirx_registers.py")
    report = nvcc_sm90(source.splitlines(), (tmp_path,), tmp_path, "registers", arch="sm_90a")
    assert_no_spills(report)
    register_a = r"\{%\d+, %\d+, %\d+, %\d+\}"  # wgmma's A: four registers, not a descriptor
    assert re.search(r"wgmma\.mma_async\.sync\.aligned\.m64n256k8\.f32\.tf32\.tf32 \{[^}]*\}, " + register_a, source)
    assert "setmaxnreg.inc.sync.aligned.u32 232" in source and "setmaxnreg.dec.sync.aligned.u32 40" in source
    facts = sass.facts((tmp_path / "out.cubin").read_bytes())
    assert facts["sass_hgmma"] > 0 and facts["sass_tma"] > 0 and facts["sass_ffma"] == 0, facts
    kernels = variants.tirx_kernels("08_tirx_registers.py", REGISTERS.DEFAULTS, "tf32", source)
    assert list(kernels) == ["main"]
    assert sorted(kernels["main"]["parameters"]) == sorted(["a_map", "b_map", "C_ptr", "M", "N", "K", "tiles", "grid"])


def test_the_registers_kernel_reads_b_where_tmas_128_byte_swizzle_put_it():
    """b_word, the kernel's address of B's element (n, k) in a stage, against TMA's 128-byte swizzle as CUTLASS
    writes it (Swizzle<3, 4, 3>: byte address bits 4-6 XORed with bits 7-9) over the 32-float boxes the producer
    copies (one per 32 columns, BK lines of k each): every element once, where TMA stored it."""
    seen = set()
    for n in range(REGISTERS.COLUMNS):
        for k in range(REGISTERS.BK):
            plain = n // 32 * (32 * REGISTERS.BK * 4) + k * REGISTERS.LINE + n % 32 * 4  # bytes, box by box
            stored = plain ^ (((plain >> 7) & 7) << 4)
            assert REGISTERS.b_word(n, k) == stored // 4, (n, k)
            seen.add(stored // 4)
    assert seen == set(range(REGISTERS.COLUMNS * REGISTERS.BK))


@pytest.mark.skipif(importlib.util.find_spec("cupy") is None, reason="no CuPy")
def test_the_tirx_kernel_is_built_for_sm90a_beside_the_arch_cupy_adds(monkeypatch):
    """Compiled.cubin as the run path calls it; CuPy appends its own -arch, of the GPU (sm_90 on an H100 or H200,
    emulated: it reads the device), after the rung's sm_90a, and wgmma needs the latter."""
    from cupy.cuda import compiler

    from kernels import sass

    monkeypatch.setattr(compiler, "_get_arch_for_options_for_nvrtc", lambda arch: (f"-arch=sm_{arch}", "cubin"))
    compiled = variants.Compiled("07_tirx_wgmma.py", dict(TIRX.DEFAULTS), "sm_90", "bf16")
    assert sass.facts(compiled.cubin(tirx_source()))["sass_hgmma"] > 0


# 04's parameters come from its own search (tested below)
@pytest.mark.parametrize("file", [f for f in variants.SCHEDULES + variants.KERNELS
                                  if not hasattr(variants.schedule_module(f), "search")])
def test_defaults_and_space_are_valid(file):
    module = variants.schedule_module(file)
    assert module.check(module.DEFAULTS) is None
    assert set(module.SPACE) <= set(module.DEFAULTS)


RECIPE = variants.schedule_module("05_recipe.py")


def test_the_recipe_is_rung_12s_in_tvms_generated_cuda():
    """What 05 states to TVM, as it comes out: A copied into shared memory transposed by 4-byte cp.async (lanes
    along k, k rows 4 floats longer than the tile), B by 16-byte cp.async, STAGES - 1 tiles in flight, each k-step's
    fragments read as float4s (2 of A and 4 of B a thread), 8×16 accumulators, float4 stores of the output."""
    p = RECIPE.DEFAULTS
    source, sch = source_for("05_recipe.py", (4096, 4096, 4096))
    assert variants.launch_dims(sch) == ((4096 // p["BM"] * 4096 // p["BN"], 1, 1), (256, 1, 1))
    copies = re.findall(r"ptx_cp_async_legacy_(\w+)\((\w+)_shared_ptr, \(*(.*?)\), \w+_ptr", source)
    assert {(kind, name) for kind, name, _ in copies} == {("ca_4_4_4", "A"), ("cg_16_4_4", "B")}
    assert any(name == "A" and "* 260)" in index for _, name, index in copies)  # the transposed row's stride
    assert f"cp.async.wait_group {p['STAGES'] - 1}" in source
    assert len(re.findall(r"\*\(float4\*\)\(A_shared_local_ptr[^=]*= \*\(float4\*\)\(A_shared_ptr", source)) > 0
    assert len(re.findall(r"\*\(float4\*\)\(B_shared_local_ptr[^=]*= \*\(float4\*\)\(B_shared_ptr", source)) > 0
    assert re.search(r"float C_local_ptr\[128\]", source) and "*(float4*)(C_ptr" in source


@pytest.mark.parametrize("shape, b_copy", [((4096, 96, 8192), "pred_cg_16_4_4"), ((1000, 999, 1001), "pred_ca_4_4_4")],
                         ids=str)
def test_the_recipe_copies_b_by_float4s_only_where_its_rows_are_whole_float4s(shape, b_copy):
    """B's 16-byte copies need 16-byte aligned rows: where n is not a multiple of 4, B is copied float by float."""
    source, _ = source_for("05_recipe.py", shape)
    assert set(re.findall(r"ptx_cp_async_legacy_(\w+)\(B(?:_pad)?_shared_ptr", source)) == {b_copy}


@pytest.mark.parametrize("shape", [(1, 1, 1), (33, 65, 17), (1000, 999, 1001), (4096, 96, 8192)], ids=str)
def test_the_recipe_pads_any_shape_with_zero_filled_copies_and_covers_every_output(shape):
    """Shapes that are not whole tiles: the copies outside the matrices write zeros (predicated cp.async), the
    output is written element by element under its bounds, and the grid covers every output tile."""
    m, n, _ = shape
    p = RECIPE.DEFAULTS
    source, sch = source_for("05_recipe.py", shape)
    grid, block = variants.launch_dims(sch)
    assert block == (256, 1, 1) and grid[0] * p["BM"] * p["BN"] >= m * n
    assert re.search(r"ptx_cp_async_legacy_pred_\w+\(", source) and "*(float4*)(C_ptr" not in source


def test_every_point_of_the_recipes_space_is_scheduled():
    """The tune stage's candidates: each valid point of the space schedules at a whole and a padded shape."""
    import itertools

    names = list(RECIPE.SPACE)
    valid = [p for p in ({**RECIPE.DEFAULTS, **dict(zip(names, combo))}
                         for combo in itertools.product(*RECIPE.SPACE.values())) if RECIPE.check(p) is None]
    assert len(valid) > 1
    for params in valid:
        for shape in ((2048, 2048, 2048), (1000, 999, 1001)):
            variants.scheduled("05_recipe.py", params, shape, SM90)


def test_the_kernel_takes_only_the_three_pointers():
    """Static shapes: the launch passes (A, B, C) and nothing else."""
    source, _ = source_for("01_d2l.py", (33, 65, 17))
    signature = re.search(r"main_kernel\(([^)]*)\)", source).group(1)
    assert [p.split()[-1] for p in signature.split(",")] == ["A_ptr", "B_ptr", "C_ptr"]


# --- 04: MetaSchedule -------------------------------------------------------------------------------------------

METASCHEDULE = variants.schedule_module("04_metaschedule.py")
AWKWARD = [(33, 65, 17), (1000, 999, 1001), (128, 96, 160)]


def measure_on_cpu(shape, target):
    """The tune stage's part for a CPU: each candidate (a parameter set of the variant) scheduled, built for llvm
    and timed in this process; the harness does the same on a GPU in its worker."""
    import time

    import tvm

    m, n, k = shape
    rng = np.random.default_rng(0)
    a, b = (tvm.runtime.tensor(rng.standard_normal(s, np.float32)) for s in ((m, k), (k, n)))
    c = tvm.runtime.tensor(np.zeros((m, n), np.float32))

    def measure(param_sets):
        rows = []
        for params in param_sets:
            try:
                lib = tvm.compile(METASCHEDULE.schedule(variants.matmul(*shape), params, target).mod, target=target)
            except Exception as exc:
                rows.append({"status": "error", "message": str(exc), "median_s": None})
                continue
            times = []
            for _ in range(3):
                start = time.perf_counter()
                lib(a, b, c)
                times.append(time.perf_counter() - start)
            rows.append({"status": "ok", "message": "", "median_s": sorted(times)[1]})
        return rows
    return measure


def test_metaschedule_tunes_resumes_seeds_and_moves_its_best_trace_to_other_shapes_on_the_cpu(tmp_path):
    """The search on the llvm target (MetaSchedule's CPU space; the same search loop, database and trace transfer
    as on a GPU): every candidate is measured by the caller's `measure`, a rerun tops the database up instead of
    starting again, a committed result seeds an empty database without re-measuring, and the best trace computes
    the right product at shapes that are not whole tiles."""
    import logging

    import tvm

    cpu = tvm.target.Target({"kind": "llvm", "num-cores": 2})
    log = logging.getLogger("test")
    work, shape = tmp_path / "64", (64, 64, 64)
    asked = []

    def measure(param_sets):
        asked.extend(param_sets)
        return measure_on_cpu(shape, cpu)(param_sets)

    first = METASCHEDULE.search(shape, cpu, 4, work, None, 0, log, measure)
    assert first["trials"] == 4 and first["median_s"] > 0 and first["records"] and len(asked) == 4
    assert all(set(p) == {"trace", "tuned_shape"} for p in asked)
    assert METASCHEDULE.search(shape, cpu, 4, work, None, 0, log, measure)["trials"] == 4  # nothing left to run
    assert len(asked) == 4
    topped_up = METASCHEDULE.search(shape, cpu, 6, work, None, 0, log, measure)
    assert topped_up["trials"] == 6 and topped_up["median_s"] <= first["median_s"] and len(asked) == 6
    seeded = METASCHEDULE.search(shape, cpu, 6, tmp_path / "elsewhere", topped_up, 0, log, measure)
    assert seeded["trials"] == 6 and seeded["params"] == topped_up["params"] and len(asked) == 6
    json.dumps(topped_up)  # a tune result is plain JSON

    for other in [shape, *AWKWARD]:
        run_on_cpu(METASCHEDULE.schedule(variants.matmul(*other), topped_up["params"], cpu), other, cpu)


def test_a_candidate_that_fails_to_measure_counts_as_a_trial_and_is_never_the_best(tmp_path):
    import logging

    import tvm

    cpu = tvm.target.Target({"kind": "llvm", "num-cores": 2})
    shape, calls = (64, 64, 64), []

    def measure(param_sets):  # the first candidate of every round hangs (the watchdog's row)
        rows = measure_on_cpu(shape, cpu)(param_sets)
        calls.append(len(rows))
        rows[0] = {"status": "timeout", "message": "still running after 120 s: killed", "median_s": None}
        return rows

    found = METASCHEDULE.search(shape, cpu, 3, tmp_path, None, 0, logging.getLogger("test"), measure)
    assert found["trials"] == 3 and sum(calls) == 3
    assert len(found["records"]) == 2 and found["median_s"] < METASCHEDULE.FAILED_S


def sampled_cuda_record(seed: int) -> dict:
    """A record as tuning would give one, without a GPU: a sample of MetaSchedule's CUDA design space at 256³."""
    from tvm.s_tir import meta_schedule as ms

    module = METASCHEDULE.as_module(variants.matmul(256, 256, 256))
    context = ms.TuneContext(mod=module, target=METASCHEDULE.target_for(SM90), space_generator="post-order-apply",
                             task_name="main", rand_state=seed)
    return {"trace": METASCHEDULE.plain(context.generate_design_space()[0].trace.as_json()), "tuned_shape": [256] * 3}


def block_tile(params) -> tuple[int, int]:
    trace = METASCHEDULE.tuned_trace(params)
    tile_i, tile_j, _ = (np.prod([int(f) for f in trace.decisions[t][1:]]) for t in METASCHEDULE._tiles(trace))
    return int(tile_i), int(tile_j)


@pytest.mark.slow
@pytest.mark.skipif(NVCC is None, reason="no nvcc (requirements-test.txt installs one)")
@pytest.mark.parametrize("seed", [1, 5])  # two samples that pass MetaSchedule's GPU checks at 256³
def test_a_cuda_trace_moves_to_any_shape_and_compiles_for_sm90(seed, tmp_path):
    params = sampled_cuda_record(seed)
    tile_i, tile_j = block_tile(params)
    for shape in [(256, 256, 256), (4096, 4096, 4096), *AWKWARD]:
        sch = METASCHEDULE.schedule(variants.matmul(*shape), params, SM90)
        grid, _ = variants.launch_dims(sch)
        assert grid[0] * grid[1] * grid[2] == cdiv(shape[0], tile_i) * cdiv(shape[1], tile_j), shape
        nvcc_sm90(variants.cuda_source(sch, SM90).splitlines(), (tmp_path,), tmp_path, "metaschedule")


@pytest.mark.slow
def test_the_committed_trace_fits_a_reduction_shorter_than_one_k_tile():
    """The H100's committed MetaSchedule trace at the validation shapes whose k is under one of its k-tiles (it
    failed MetaSchedule's GPU checks there, with a pipelined k loop of one iteration): padded to two k-tiles."""
    record = json.loads((variants.HERE.parents[1] / "resources/tuning/nvidia-h100-80gb-hbm3/tvm/04_metaschedule"
                         / "fp32.json").read_text())
    params = next(iter(record["classes"].values()))["params"]
    for shape in [(1, 1, 1), (7, 13, 5), (33, 65, 1)]:
        grid, block = variants.launch_dims(METASCHEDULE.schedule(variants.matmul(*shape), params, SM90))
        assert grid == (1, 1, 1) and block[0] > 0, shape


@pytest.mark.skipif(NVCC is None, reason="no nvcc (requirements-test.txt installs one)")
def test_a_cubin_missing_its_last_byte_is_read_whole(tmp_path):
    """CuPy's nvrtc.getCUBIN returns a cubin one byte short; the driver loads it, nvdisasm refuses it unless the
    byte is restored."""
    from kernels import sass

    kernel = 'extern "C" __global__ void multiply_add(float* c) { c[0] = c[1] * c[2] + c[3]; }'
    nvcc_sm90([kernel], (tmp_path,), tmp_path, "multiply_add")
    cubin = (tmp_path / "out.cubin").read_bytes()
    assert sass.whole_elf(cubin[:-1]) == cubin and sass.whole_elf(cubin) == cubin
    if sass.nvdisasms():
        assert sass.facts(cubin[:-1])["sass_ffma"] == 1


def test_reading_sass_is_not_in_a_tvm_tuning_key():
    """kernels/sass.py only reads what was compiled: editing it must not make committed TVM tuning stale."""

    from gemmbench.tuning import records
    from kernels import registry

    files = {Path(f).name for f in records.determining_files(registry.load()["tvm/04_metaschedule"])}
    assert {"04_metaschedule.py", "variants.py"} <= files and "sass.py" not in files


def test_async_pipeline_stages_become_cp_async_copies():
    """The H100's MetaSchedule record pipelines its shared fetches asynchronously; TVM's CUDA source must then copy
    with cp.async, not through registers with only the commit and wait instructions left."""

    from gemmbench.tuning import records
    from kernels import registry

    variant = registry.load()["tvm/04_metaschedule"]
    record = json.loads(records.committed_path("nvidia-h100-80gb-hbm3", variant, "fp32").read_text())
    params = record["classes"]["4096"]["params"]
    assert "software_pipeline_async_stages" in json.dumps(params["trace"])
    source = variants.cuda_source(METASCHEDULE.schedule(variants.matmul(256, 256, 256), params, SM90), SM90)
    assert re.search(r"cp\.async\.c[ag]\.shared\.global", source)


def test_without_a_record_the_tuned_variant_says_what_is_missing():
    assert "tune stage" in METASCHEDULE.check(METASCHEDULE.DEFAULTS)
    with pytest.raises(ValueError, match="tune stage"):
        METASCHEDULE.schedule(variants.matmul(64, 64, 64), METASCHEDULE.DEFAULTS, SM90)


def test_shared_load_widths_are_counted_from_sass():
    from kernels import sass

    listing = """
        /*0100*/                   LDS.128 R8, [R2+0x10] ;          /* 0x000010000208b984 */
        /*0110*/                   LDS R12, [R3] ;                  /* 0x000000000303c984 */
        /*0120*/               @P0 LDG.E.128.CONSTANT R16, desc[UR4][R4.64] ;
        /*0130*/                   FFMA R20, R8, R12, R20 ;
        /*0140*/                   FFMA R21, R9, R12, R21 ;
        /*0150*/                   HMMA.1688.F32.TF32 R24, R4, R6, R24 ;
        /*0160*/                   UTMALDG.2D [UR8], [UR4] ;
"""
    assert sass.memory_instructions(listing) == {"sass_ffma": 2, "sass_hmma": 1, "sass_hgmma": 0, "sass_tma": 1,
                                                 "sass_lds32": 1, "sass_lds64": 0, "sass_lds128": 1, "sass_ldg128": 1}
    assert sass.memory_instructions("") == {} and sass.facts(b"// PTX, not a cubin") == {"sass_unread": "not a cubin"}


def test_a_cubin_one_nvdisasm_refuses_is_read_by_the_next(tmp_path, monkeypatch):
    """The GPU nodes' toolkit nvdisasm rejects NVRTC's cubins; the wheel's, tried next, reads them."""
    from kernels import sass

    refuses, reads = tmp_path / "old-nvdisasm", tmp_path / "new-nvdisasm"
    refuses.write_text("#!/bin/sh\necho 'nvdisasm fatal : invalid ELF file' >&2\nexit 1\n")
    reads.write_text("#!/bin/sh\necho '        /*0000*/                   FFMA R0, R1, R2, R0 ;'\n")
    for tool in (refuses, reads):
        tool.chmod(0o755)
    monkeypatch.setattr(sass, "nvdisasms", lambda: [str(refuses), str(reads)])
    assert sass.facts(b"\x7fELF a cubin")["sass_ffma"] == 1
    monkeypatch.setattr(sass, "nvdisasms", lambda: [str(refuses)])
    assert sass.facts(b"\x7fELF a cubin") == {"sass_unread": f"{refuses}: nvdisasm fatal : invalid ELF file"}


def test_metaschedule_runs_without_a_trial_budget_where_its_committed_tuning_stands(tmp_path, monkeypatch):
    """Enabled by default once tuned: with tune.autotuner.trials 0, a result committed for the GPU model runs as it
    was searched (its own settings) while it stands for the current sources; without one, or a stale one, the
    variant is left out."""
    from gemmbench import configuration, plan
    from gemmbench.tuning import records
    from kernels import registry

    monkeypatch.setattr(records, "COMMITTED", tmp_path)
    cfg = configuration.validate({"device": "cuda", "tune": {"gpu": "Test GPU"}})
    variant = registry.load()["tvm/04_metaschedule"]
    assert not plan.tuned(cfg, variant)
    settings = {"trials": 7, "seed": 0, "sizes": [4096]}
    path = records.committed_path("test-gpu", variant, "fp32")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"key": records.key(variant, "fp32", settings), "settings": settings,
                                "compilers": records.compilers(), "classes": {}}))
    assert plan.tuned(cfg, variant) and records.committed(cfg["tune"], variant, "fp32", "test-gpu")[1]
    assert variant.key in {v.key for v in plan.variants(cfg, "cuda")}
    other = {"nvrtc": "0.0"}  # searched with other compilers: without a budget to search again, it still stands
    path.write_text(json.dumps({"key": records.key(variant, "fp32", settings, other), "settings": settings,
                                "compilers": other, "classes": {}}))
    assert plan.tuned(cfg, variant)
    path.write_text(json.dumps({"key": "from-other-sources", "settings": settings, "compilers": records.compilers(),
                                "classes": {}}))
    assert not plan.tuned(cfg, variant)


@pytest.mark.parametrize("seed", [1, 5])
def test_a_candidates_accumulators_per_thread_are_its_block_tile_over_its_threads(seed):
    """What the search refuses unmeasured (over MAX_ACCUMULATORS) is counted from the trace's tile decisions."""
    params = sampled_cuda_record(seed)
    _, block = variants.launch_dims(METASCHEDULE.schedule(variants.matmul(256, 256, 256), params, SM90))
    tile_i, tile_j = block_tile(params)
    assert METASCHEDULE.accumulators(METASCHEDULE.tuned_trace(params)) * np.prod(block) == tile_i * tile_j


def test_a_recipe_parameter_set_makes_metaschedules_variant_the_recipe_rungs_kernel():
    """Where the recipe's set won the contest, 04 generates what 05 generates for that set (its lowering options
    too: B's 16-byte copies need the recipe's storage rewrite off)."""
    recipe = METASCHEDULE.recipe_sets()[0]
    assert METASCHEDULE.check({**METASCHEDULE.DEFAULTS, "recipe": recipe}) is None
    params = {**METASCHEDULE.DEFAULTS, "tuned_shape": [4096] * 3, "recipe": recipe}
    assert variants.code("04_metaschedule.py", params, "fp32") == variants.code("05_recipe.py", recipe, "fp32")
    refused = {**recipe, "STAGES": 3, "BK": 16}  # over TVM's 48 KiB of static shared memory
    assert METASCHEDULE.check({**METASCHEDULE.DEFAULTS, "recipe": refused}) == METASCHEDULE.recipe().check(refused)
    assert METASCHEDULE.recipe().check(refused) and refused not in METASCHEDULE.recipe_sets()


def test_metaschedules_search_ends_in_a_contest_with_the_recipe_and_keeps_the_fastest(tmp_path, monkeypatch):
    """On a GPU target the search's last round times MetaSchedule's best records again beside every recipe set, in
    one sitting: the variant's parameters are the fastest contender's, whichever schedule it comes from (a rerun
    whose database stands for the trials holds the contest again, in its own sitting)."""
    import logging

    # MetaSchedule's sampling is not the same from run to run (its threads): its 2 candidates may both hold more
    # accumulators than a thread may, and be refused unmeasured; here every candidate is measured
    monkeypatch.setattr(METASCHEDULE, "MAX_ACCUMULATORS", 1 << 30)

    sets = METASCHEDULE.recipe_sets()
    winner = sets[len(sets) // 2]
    for recipe_wins in (True, False):
        rounds = []

        def measure(param_sets):  # made-up times: the search's logic, not a GPU, is under test
            rounds.append(param_sets)
            return [{"status": "ok", "message": "",
                     "median_s": (0.5 if recipe_wins else 2.0) if p.get("recipe") == winner else
                     1.5 if p.get("recipe") else 1.0 + i * 1e-3} for i, p in enumerate(param_sets)]

        found = METASCHEDULE.search((256, 256, 256), SM90, 2, tmp_path, None, 0, logging.getLogger("test"), measure)
        contest = rounds[-1]
        metaschedule = [p for p in contest if not p["recipe"]]
        assert len(metaschedule) == min(METASCHEDULE.CONTENDERS, len(found["records"])) and metaschedule
        assert [p["recipe"] for p in contest if p["recipe"]] == sets and len(found["contest"]) == len(contest)
        assert found["trials"] == 2 and len(rounds) == (2 if recipe_wins else 1)  # MetaSchedule's round, then none
        assert found["params"] == ({**metaschedule[0], "recipe": winner, "trace": None} if recipe_wins
                                   else metaschedule[0])
        assert found["median_s"] == (0.5 if recipe_wins else 1.0)

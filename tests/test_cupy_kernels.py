"""The CuPy ladder without a GPU: every rung compiles for sm_90 with nvcc (CuPy/NVRTC need a GPU), with its
default and its committed tuned parameters, without spilling; its launch covers any shape; the tuner's
candidates are valid and reproducible."""
from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from gemmbench import ROOT
from gemmbench.run.task import pick
from gemmbench.tuning import records, search
from kernels import registry
from kernels.cupy import tensorcore, variants
from kernels.cupy.nvrtc import HERE, SM90A
from kernels.cupy.tensorcore import tma

RUNGS = variants.RUNGS


def find_nvcc() -> str | None:
    """The nvcc wheel of requirements-test.txt (matching the venv's NVVM), else one on PATH."""
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations if spec else []):
        if (Path(root) / "cu13" / "bin" / "nvcc").exists():
            return str(Path(root) / "cu13" / "bin" / "nvcc")
    return shutil.which("nvcc")


NVCC = find_nvcc()
RUNG_VARIANTS = {r.name: registry.load()[f"cupy/{r.name}"] for r in RUNGS}


def committed_params(variant) -> list[dict]:
    """The parameter sets of the variant's committed H100 size classes (none if it has no result)."""
    path = records.committed_path("nvidia-h100-80gb-hbm3", variant, "fp32")
    classes = json.loads(path.read_text())["classes"] if path.exists() else {}
    return [{**variant.params, **c["params"]} for c in classes.values()]


def nvcc_sm90(lines: list[str], include_dirs: tuple[Path, ...], tmp_path, name: str, arch: str = "sm_90") -> str:
    """ptxas's report (-v) for a source of explicit template instantiations, compiled to a cubin (out.cubin)."""
    source = tmp_path / f"instances_of_{name}.cu"
    source.write_text("\n".join(lines) + "\n")
    done = subprocess.run([NVCC, f"-arch={arch}", "-cubin", "-std=c++17", "-Xptxas", "-v",
                           *(f"-I{d}" for d in include_dirs), "-o", str(tmp_path / "out.cubin"), str(source)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stderr


def assert_no_spills(report: str) -> None:
    spills = [int(x) for x in re.findall(r"(\d+) bytes spill stores", report)]
    assert spills and not any(spills), report


def compile_sm90(rung, param_sets, tmp_path, arch: str = "sm_90", operand: str = "float",
                 parameters: str | None = None, mode: str = "fp32") -> str:
    """ptxas's report for every instantiation (both float4 paths of the vector rungs); `operand`: A's and B's type;
    `parameters`: the kernel's, where they are not the ladder's (M, N, K, A, B, C)."""
    flags = (True, False) if rung.vec else (None,)
    unique = {json.dumps(p, sort_keys=True): p for p in param_sets}.values()
    parameters = parameters or f"int, int, int, const {operand}*, const {operand}*, float*"
    lines = [f'#include "{rung.file}"'] + [f"template __global__ void {rung.expression(p, flag, mode)}({parameters});"
                                           for p in unique for flag in flags]
    return nvcc_sm90(lines, (rung.folder, HERE), tmp_path, rung.name, arch)


@pytest.mark.skipif(NVCC is None, reason="no nvcc (requirements-test.txt installs one)")
@pytest.mark.parametrize("rung", RUNGS, ids=lambda r: r.name)
def test_every_rung_compiles_for_sm90_without_spilling(rung, tmp_path):
    """Rung 14, built for sm_90a and fed by TMA, over a sample of its space: its consumers' 232 registers are what
    setmaxnreg gives them, not what ptxas reports (the kernel's 168)."""
    params = [rung.defaults, *committed_params(RUNG_VARIANTS[rung.name])]
    if rung.launcher:
        params += search.candidates(RUNG_VARIANTS[rung.name], rung.defaults, 8, seed=1)
    report = compile_sm90(rung, params, tmp_path, "sm_90a" if SM90A in rung.options else "sm_90",
                          parameters=tma.parameters(rung.launcher).format(operand="float") if rung.launcher else None)
    entries = re.findall(r"Compiling entry function", report)
    assert len(entries) >= (2 if rung.vec else 1)
    assert_no_spills(report)
    if rung.launcher:  # the consumers read shared memory 128 bits at a time only; the copies are TMA's
        from kernels import sass

        found = sass.facts((tmp_path / "out.cubin").read_bytes())
        if "sass_unread" not in found:
            assert found["sass_tma"] > 0 and found["sass_ffma"] > 0 and found["sass_lds128"] > 0, found
            assert found["sass_lds32"] == found["sass_lds64"] == 0 and found["sass_hmma"] == 0, found


@pytest.mark.skipif(NVCC is None, reason="no nvcc (requirements-test.txt installs one)")
@pytest.mark.parametrize("rung,mode",
                         [(r, m) for r in tensorcore.variants.RUNGS if r.launcher is None for m in r.kernels],
                         ids=lambda x: getattr(x, "name", x))
def test_every_tensor_core_rung_compiles_for_sm90a_to_matrix_instructions_without_spilling(rung, mode, tmp_path):
    """In each of its modes: TF32 kernels take float operands, BF16 kernels bfloat16 bits."""
    from kernels import sass

    variant = registry.load()[f"cupy/{rung.name}"]
    operand = {"float32": "float", "uint16": "unsigned short"}[registry.OPERAND_DTYPE[mode]]
    report = compile_sm90(rung, search.candidates(variant, rung.defaults, 8, seed=1), tmp_path, "sm_90a", operand,
                          mode=mode)
    assert_no_spills(report)
    found = sass.facts((tmp_path / "out.cubin").read_bytes())
    if "sass_unread" not in found:  # nvdisasm is a pinned requirement; this guards a machine without one
        wgmma = SM90A in rung.options  # the rungs built for sm_90a issue wgmma (HGMMA), the others mma.sync
        assert found["sass_hgmma" if wgmma else "sass_hmma"] > 0 and found["sass_ffma"] == 0, found


@pytest.mark.skipif(NVCC is None, reason="no nvcc (requirements-test.txt installs one)")
@pytest.mark.parametrize("rung,mode", [(r, m) for r in tensorcore.variants.RUNGS if r.launcher for m in r.kernels],
                         ids=lambda x: getattr(x, "name", x))
def test_every_tma_rung_compiles_for_sm90a_to_tma_copies_and_wgmma_without_spilling(rung, mode, tmp_path):
    """Every instance: BF16 copies with TMA where rows are 16-byte aligned and with the producer warpgroup's threads
    where not; TF32 always with TMA (the host pads rows)."""
    from kernels import sass

    variant = registry.load()[f"cupy/{rung.name}"]
    assert set(variant.modes) == set(rung.kernels)
    operand = {"float32": "float", "uint16": "unsigned short"}[registry.OPERAND_DTYPE[mode]]
    report = compile_sm90(rung, search.candidates(variant, rung.defaults, 8, seed=1), tmp_path, "sm_90a",
                          parameters=tma.parameters(rung.launcher).format(operand=operand), mode=mode)
    assert_no_spills(report)
    found = sass.facts((tmp_path / "out.cubin").read_bytes())
    if "sass_unread" not in found:
        assert found["sass_hgmma"] > 0 and found["sass_tma"] > 0 and found["sass_ffma"] == 0, found


def test_a_wgmma_rung_is_refused_on_a_gpu_without_it(monkeypatch):
    """Built for sm_90a, its module would not load on another GPU: the build says why instead (a rejected build)."""
    monkeypatch.setattr("kernels.cupy.nvrtc.compute_capability", lambda: "80")
    variant = registry.load()["cupy/tc04_wgmma"]
    with pytest.raises(ValueError, match=r"tc04_wgmma is built for sm_90a .* only sm_90 GPUs run \(this one is sm_80"):
        variant.build("bf16", variant.params, None)


@pytest.mark.parametrize("folder", [HERE, HERE / "tensorcore"], ids=lambda f: f.name)
def test_the_folder_lists_its_ladder_in_order(folder):
    """`ls` reads as the ladder: every kernel file of the folder is a rung, declared in the folder's variants.py in the
    order of the file names, and registered as a built-in variant."""
    declared = {HERE: variants.RUNGS, HERE / "tensorcore": tensorcore.variants.RUNGS}[folder]
    files = sorted(p.name for p in folder.glob("*.cu"))
    assert [r.file for r in declared] == files and all(r.folder == folder for r in declared)
    assert [f"cupy/{r.name}" for r in declared] == [k for k in registry.load() if k.startswith("cupy/") and
                                                     k.split("/")[1] in {Path(f).stem for f in files}]


def test_ci_has_nvcc_when_it_claims_to():
    import os
    if os.environ.get("CI") == "true":
        assert NVCC, "CI must compile the CUDA rungs: requirements-test.txt installs nvcc"


def test_invalid_parameters_are_named():
    rung = next(r for r in RUNGS if r.name == "13_split_barriers")
    problem = rung.problems({**rung.defaults, "TM": 8, "WM": 32, "WMITER": 2})
    assert problem and "32 thread tiles" in problem
    rung = next(r for r in RUNGS if r.name == "14_warp_specialized")
    assert "8 consumer warps" in rung.problems({**rung.defaults, "BM": 128, "BN": 128})
    assert "shared memory" in rung.problems({**rung.defaults, "BK": 32, "STAGES": 8})


def test_a_point_runs_the_class_nearest_its_size():
    classes = {"1024": {}, "4096": {}, "8192": {}}
    assert pick(classes, 256, 256, 256) == "1024"
    assert pick(classes, 16384, 16384, 16384) == "8192"
    assert pick(classes, 4096, 96, 8192) == "1024"  # (m·n·k)^(1/3) ≈ 1458
    assert pick(classes, 3000, 3000, 3000) == "4096"
    assert pick(classes, 2048, 2048, 2048) == "4096"  # halfway between 1024 and 4096: the larger class
    assert pick(classes, 2047, 2047, 2047) == "1024" and pick(classes, 4096, 1024, 2048) == "4096"  # 2048 again


def test_the_tuning_key_follows_the_kernel_source(tmp_path):
    source = tmp_path / "k.cu"
    source.write_text("__global__ void k(float* c) { c[0] = 1.f; }  // v1")
    variant = registry.Variant("cupy", "k", "cuda", ("fp32",), build=None, run=None, space={"T": (1, 2)},
                               source_files=(str(source),))
    settings = {"trials": 4, "seed": 0, "sizes": [64]}
    before = records.key(variant, "fp32", settings)
    assert before == records.key(variant, "fp32", settings)
    assert before != records.key(variant, "fp32", {**settings, "trials": 5})
    same_compilers = records.compilers()
    assert before == records.key(variant, "fp32", settings, same_compilers)
    assert before != records.key(variant, "fp32", settings, {**same_compilers, "nvrtc": "0.0"})
    source.write_text("// another comment\n__global__ void k(float* c)\n{\n    c[0] = 1.f;  /* v2 */\n}\n")
    assert before == records.key(variant, "fp32", settings)  # comments and layout: the compiler sees the same
    source.write_text("__global__ void k(float* c) { c[0] = 2.f; }")
    assert before != records.key(variant, "fp32", settings)


def test_a_tuning_key_holds_only_the_compilers_of_its_family():
    """A Numba kernel tuned where TVM is not installed stands where it is; NVRTC's version keys CuPy, not Numba."""
    variants = registry.load()
    numba_rung, cupy_rung = variants["numba/05_warptile"], variants["cupy/10_pipelined"]
    settings = {"trials": 4, "seed": 0, "sizes": [64]}
    node = {"numba": "0.68.0", "numba-cuda": "0.30.4", "cupy-cuda13x": "14.2.0", "nvrtc": "13.0", "nvcc": "13.0.88",
            "nvvm": "13.0.88"}
    with_tvm = {**node, "apache-tvm": "0.27.0", "apache-tvm-ffi": "0.1.14"}
    assert records.key(numba_rung, "fp32", settings, node) == records.key(numba_rung, "fp32", settings, with_tvm)
    assert records.key(cupy_rung, "fp32", settings, node) == records.key(cupy_rung, "fp32", settings, with_tvm)
    newer_nvrtc = {**node, "nvrtc": "13.1"}
    assert records.key(numba_rung, "fp32", settings, node) == records.key(numba_rung, "fp32", settings, newer_nvrtc)
    assert records.key(cupy_rung, "fp32", settings, node) != records.key(cupy_rung, "fp32", settings, newer_nvrtc)
    assert records.key(numba_rung, "fp32", settings, node) != records.key(numba_rung, "fp32", settings,
                                                                      {**node, "numba-cuda": "0.31.0"})
    # numba-cuda compiles through NVVM: its version keys a Numba kernel, the toolkit's nvcc does not
    assert records.key(numba_rung, "fp32", settings, node) != records.key(numba_rung, "fp32", settings,
                                                                      {**node, "nvvm": "13.5.37"})
    assert records.key(numba_rung, "fp32", settings, node) == records.key(numba_rung, "fp32", settings,
                                                                      {**node, "nvcc": "13.5.37"})


def test_a_rungs_tuning_key_covers_its_launch_code_and_shared_helpers():
    rung = registry.load()["cupy/10_pipelined"]
    files = {Path(f).relative_to(ROOT).as_posix() for f in records.determining_files(rung)}
    assert {"kernels/cupy/10_pipelined.cu", "kernels/cupy/common.cuh", "kernels/cupy/nvrtc.py",
            "kernels/cupy/variants.py", "kernels/tiles.py"} <= files


def test_a_tensor_core_rungs_tuning_key_covers_the_module_that_declares_it():
    """Its launch code is every CuPy rung's, its tiles and checks are declared in
    kernels/cupy/tensorcore/variants.py."""
    rung = registry.load()["cupy/tc03_cp_async"]
    files = {Path(f).relative_to(ROOT).as_posix() for f in records.determining_files(rung)}
    assert {"kernels/cupy/tensorcore/tc03_cp_async.cu", "kernels/cupy/10_pipelined.cu", "kernels/cupy/nvrtc.py",
            "kernels/cupy/tensorcore/variants.py"} <= files


def test_every_committed_tuning_result_matches_the_current_sources():
    """A stale committed result would silently trigger a search on every GPU of its model: re-tune and commit it.
    The H100's results cover every variant the default run tunes, in every mode it has."""
    from gemmbench import configuration, plan
    from kernels import registry

    cfg = configuration.validate({"tune": {"gpu": "NVIDIA H100 80GB HBM3"}})
    variants = registry.load()
    found = {}
    for path in records.record_paths(records.COMMITTED):
        gpu, family, name, mode = path.relative_to(records.COMMITTED).with_suffix("").parts
        variant = variants[f"{family}/{name}"]
        ran_with = json.loads(path.read_text()).get("compilers")  # the GPU node's, not this machine's
        assert ran_with and records.committed(cfg["tune"], variant, mode, gpu, ran_with)[1], f"{path} is stale"
        found.setdefault(gpu, set()).add(variant.key)
    cfg = configuration.validate({"tune": {"gpu": "NVIDIA H100 80GB HBM3"}, "modes": list(registry.MODES)})
    h100 = "nvidia-h100-80gb-hbm3"
    tuned = [v for v in plan.variants(cfg, "cuda") if plan.tuned(cfg, v)]
    # or searched on a model of the same architecture and SM count, which the H100's run takes (labelled)
    transferred = {v.key for v in tuned if v.key not in found[h100] and all(
        records.origin(cfg["tune"], v, mode, h100, records.facts_for(h100)) == "transferred" for mode in v.modes)}
    assert {v.key for v in tuned} == found[h100] | transferred

"""The back-to-back workload, D = (A0·B0)·B1, without a GPU: its plan, tables, fused kernels' compilation for
sm_90, and their tiling (block rows, k chunks, zero-filled edges, thread and mma-fragment ownership) modelled in
NumPy from the kernels' index maps and checked against NumPy's product."""
import itertools
import json
import re

import numpy as np
import pandas as pd
import pytest
from conftest import snakemake
from test_cupy_kernels import NVCC, assert_no_spills, nvcc_sm90

from gemmbench import configuration, plan, workloads
from gemmbench.configuration import ConfigError
from gemmbench.present import views
from gemmbench.stages import aggregate
from kernels import registry
from kernels.b2b import fused, variants

B2B = workloads.get("b2b")


def test_b2b_costs_count_both_products_and_leave_the_intermediate_out():
    sizes = {"m": 1000, "k0": 64, "n0": 128, "n1": 32}
    assert B2B.flops(sizes) == 2 * 1000 * 64 * 128 + 2 * 1000 * 128 * 32
    assert B2B.min_bytes(sizes) == 4 * (1000 * 64 + 64 * 128 + 128 * 32 + 1000 * 32)
    assert B2B.label(sizes) == "1000x64x128x32" and B2B.parse("1000x64x128x32") == sizes
    with pytest.raises(ValueError, match="a b2b shape has 4 sizes"):
        B2B.parse("1000x64x128")


def test_the_b2b_plan_is_every_combination_of_its_axes_plus_awkward_shapes():
    cfg = configuration.validate({"workloads": ["b2b"],
                           "b2b": {"m": [256, 4096], "k0": [64], "n0": [64, 256], "n1": [128]}})
    sweep = plan.sweep_shapes(cfg, "b2b")
    assert [s.label for s in sweep] == ["256x64x64x128", "256x64x256x128", "4096x64x64x128", "4096x64x256x128"]
    checked = plan.validation_shapes(cfg, "b2b")
    assert {s.kind for s in checked} == {"sweep", "awkward"} and len(checked) == 4 + 7
    assert {v.key for v in plan.variants(cfg, "cuda")} == {
        "cublas/b2b_unfused", "cupy/b2b_unfused_10_pipelined", "cupy/b2b_fused_simt", "cupy/b2b_fused_mma",
        "cupy/b2b_fused_warptile", "cupy/b2b_fused_resident", "cupy/b2b_fused_wgmma", "cpu/b2b_unfused_numpy-blas"}
    assert all(v.workload == "gemm" for v in plan.variants(configuration.validate({"workloads": ["gemm"]}), "cuda"))


def test_a_variant_of_another_workload_is_refused_by_name():
    with pytest.raises(ConfigError, match=r"cupy/b2b_fused_mma.*a workload not in workloads: \['gemm'\]"):
        plan.variants(configuration.validate({"workloads": ["gemm"], "variants": ["cupy/b2b_fused_mma"]}), "cuda")
    with pytest.raises(ConfigError, match="a b2b shape has 4 sizes"):
        plan.Shape.of("b2b", (1, 2, 3))


def test_fused_variants_declare_the_widths_their_block_tile_spans():
    variant = registry.load()["cupy/b2b_fused_mma"]
    assert variant.unsupported(65536, 4096, 256, 256, {}) is None
    assert "up to 256" in variant.unsupported(4096, 64, 257, 64, {})
    assert "up to 256" in variant.unsupported(4096, 64, 64, 512, {})
    cfg = configuration.validate({"workloads": ["b2b"], "b2b": {"m": [64], "k0": [64], "n0": [512], "n1": [64]}})
    assert "up to 256" in plan.skip_reason(cfg, variant, plan.sweep_shapes(cfg, "b2b")[0])


def _bench_row(variant, family, mode, m, k0, n0, n1, median_s):
    return {"gpu": "NVIDIA H200", "gpu_uuid": "GPU-1", "host": "h", "device": "cuda", "workload": "b2b",
            "family": family, "variant": variant, "mode": mode, "m": m, "k0": k0, "n0": n0, "n1": n1,
            "role": "baseline" if family == "cublas" else "unfused" if variant.startswith("b2b_unfused") else "",
            "shape_kind": "sweep", "cache": "hot", "seed": 1, "status": "ok", "message": "", "median_s": median_s}


def test_b2b_rows_carry_their_shape_costs_and_speedups(tmp_path):
    rows = [_bench_row("b2b_unfused", "cublas", "fp32", 4096, 64, 64, 64, 3e-5),
            _bench_row("b2b_unfused_10_pipelined", "cupy", "fp32", 4096, 64, 64, 64, 2e-5),
            _bench_row("b2b_fused_simt", "cupy", "fp32", 4096, 64, 64, 64, 1e-5),
            _bench_row("b2b_fused_simt", "cupy", "fp32", 4096, 64, 256, 64, 1e-5)]  # no baseline at this shape
    (tmp_path / "b.json").write_text(json.dumps({"rows": rows, "devices": []}))
    summary = aggregate.run(build_paths=[], validation_paths=[], bench_paths=[tmp_path / "b.json"],
                               outdir=tmp_path / "tables")["summary"].set_index(["variant", "n0"])
    fused_row = summary.loc[("b2b_fused_simt", 64)]
    assert fused_row.workload == "b2b" and pd.isna(fused_row.n) and pd.isna(fused_row.k)
    assert fused_row.flops == B2B.flops({"m": 4096, "k0": 64, "n0": 64, "n1": 64})
    assert fused_row.speedup_vs_baseline == pytest.approx(3.0)
    assert fused_row.speedup_vs_unfused_best == pytest.approx(2.0)  # against the faster unfused variant
    assert fused_row.pct_of_baseline == pytest.approx(300.0)
    assert pd.isna(summary.loc[("b2b_fused_simt", 256)].speedup_vs_baseline)  # nothing invented
    written = pd.read_csv(tmp_path / "tables/summary.csv")
    assert written.k0.dropna().astype(int).tolist() == [64] * 4


# --- the fused kernels' tiling, modelled in NumPy from their index maps -------------------------------------


def _tile(matrix, row0, col0, rows, cols):
    """A zero-filled rows×cols window (cp.async with src-size 0 outside the matrix)."""
    out = np.zeros((rows, cols), dtype=np.float64)
    window = matrix[row0:row0 + rows, col0:col0 + cols]
    out[:window.shape[0], :window.shape[1]] = window
    return out


def _simt_product(a, b, np_):
    """SimtTile::step over one chunk: thread (tx, ty) owns rows ty + 16 i and columns tx + 16 j."""
    out, owners = np.zeros((fused.ROWS_PER_BLOCK, np_)), np.zeros((fused.ROWS_PER_BLOCK, np_), dtype=int)
    for thread in range(fused.THREADS):
        tx, ty = thread % 16, thread // 16
        rows = [ty + 16 * i for i in range(fused.ROWS_PER_BLOCK // 16)]
        cols = [tx + 16 * j for j in range(np_ // 16)]
        out[np.ix_(rows, cols)] = a[rows, :] @ b[:, cols]
        owners[np.ix_(rows, cols)] += 1
    assert (owners == 1).all()  # every element of the tile has exactly one thread
    return out


def _warptile_product(a, b, np_):
    """WarpTile::step over one chunk: warp w owns rows (w / 4)·32 + … and columns (w % 4)·np/4 + …; lane l has rows
    l / 4 + 8 i (i < 4), read along k as float4s, and the float4 column groups (l % 4)·4 + 16 g (g < np/64)."""
    out, owners = np.zeros((fused.ROWS_PER_BLOCK, np_)), np.zeros((fused.ROWS_PER_BLOCK, np_), dtype=int)
    for thread in range(fused.THREADS):
        warp, lane = thread // 32, thread % 32
        rows = [(warp // 4) * 32 + lane // 4 + 8 * i for i in range(4)]
        cols = [(warp % 4) * (np_ // 4) + (lane % 4) * 4 + 16 * g + e for g in range(np_ // 64) for e in range(4)]
        for k4 in range(0, a.shape[1], 4):  # a float4 of each row along k, then four k-steps of B's float4s
            out[np.ix_(rows, cols)] += a[rows, k4:k4 + 4] @ b[k4:k4 + 4, cols]
        owners[np.ix_(rows, cols)] += 1
    assert (owners == 1).all()  # every element of the tile has exactly one thread
    return out


def _mma_product(a, b, np_):
    """MmaTile::step: per warp 16 rows × np/2 columns; per lane the m16n8k8 fragments as the .cu file reads them
    (a[g][t], a[g+8][t], a[g][t+4], a[g+8][t+4]; b[t][g], b[t+4][g]), assembled into the matrices the PTX ISA
    defines for those registers, multiplied, and scattered back as the accumulator layout (g, 2t), (g+8, 2t)."""
    out, owners = np.zeros((fused.ROWS_PER_BLOCK, np_)), np.zeros((fused.ROWS_PER_BLOCK, np_), dtype=int)
    for warp in range(fused.THREADS // 32):
        row0, col0 = (warp % 4) * 16, (warp // 4) * (np_ // 2)
        for j in range(np_ // 16):
            acc = np.zeros((16, 8))
            for k in range(0, fused.BK, 8):
                fa, fb = np.full((16, 8), np.nan), np.full((8, 8), np.nan)
                for lane in range(32):
                    g, t = lane // 4, lane % 4
                    ar = lambda r, c: a[row0 + g + r, k + t + c]  # noqa: E731  (as ar[...] in the kernel)
                    br = lambda r: b[k + t + r, col0 + g + 8 * j]  # noqa: E731
                    # the ISA's A fragment: a0 (g, t), a1 (g+8, t), a2 (g, t+4), a3 (g+8, t+4)
                    fa[g, t], fa[g + 8, t], fa[g, t + 4], fa[g + 8, t + 4] = ar(0, 0), ar(8, 0), ar(0, 4), ar(8, 4)
                    fb[t, g], fb[t + 4, g] = br(0), br(4)  # B fragment: b0 (t, g), b1 (t+4, g)
                acc += fa @ fb
            for lane in range(32):
                g, t = lane // 4, lane % 4
                for r, c, e in ((g, 2 * t, 0), (g, 2 * t + 1, 1), (g + 8, 2 * t, 2), (g + 8, 2 * t + 1, 3)):
                    # store(): acc[j][e] goes to (row0 + g (+8), col0 + 8 j + 2 t (+1))
                    row, col = row0 + g + 8 * (e >= 2), col0 + 8 * j + 2 * t + e % 2
                    out[row, col] = acc[r, c]
                    owners[row, col] += 1
    assert (owners == 1).all()
    return out


def _fused_model(a0, b0, b1, product):
    """fused.cuh's b2b_fused: per block of ROWS_PER_BLOCK rows, phase 1 over k0 chunks into the slice (capacity
    np0), phase 2 over n0 chunks of the slice against B1 (capacity np1), stores clipped to D."""
    (m, k0), n0, n1 = a0.shape, b0.shape[1], b1.shape[1]
    np0, np1, bm, bk = fused.capacity(n0), fused.capacity(n1), fused.ROWS_PER_BLOCK, fused.BK
    d = np.full((m, n1), np.nan)
    for row0 in range(0, m, bm):
        sliced = sum(product(_tile(a0, row0, c, bm, bk), _tile(b0, c, 0, bk, np0), np0) for c in range(0, k0, bk))
        assert not sliced[:, n0:].any()  # columns past n0 stay zero: phase 2 may read them
        tile = sum(product(sliced[:, c:c + bk], _tile(b1, c, 0, bk, np1), np1) for c in range(0, n0, bk))
        d[row0:row0 + bm] = tile[:min(bm, m - row0), :n1]
    return d


@pytest.mark.parametrize("product", [_simt_product, _mma_product, _warptile_product], ids=["simt", "mma", "warptile"])
@pytest.mark.parametrize("shape", [(1, 1, 1, 1), (7, 13, 5, 3), (65, 33, 64, 129), (130, 70, 200, 256)])
def test_the_fused_tiling_computes_the_chained_product(product, shape):
    m, k0, n0, n1 = shape
    rng = np.random.default_rng(sum(shape))
    a0, b0, b1 = (rng.random(s) * 2 - 1 for s in ((m, k0), (k0, n0), (n0, n1)))
    np.testing.assert_allclose(_fused_model(a0, b0, b1, product), (a0 @ b0) @ b1, rtol=1e-12, atol=1e-12)


def test_shared_memory_of_every_instance_fits_an_sm90_block():
    for np0, np1 in itertools.product(fused.CAPACITIES, repeat=2):
        assert fused.smem_bytes(np0, np1) <= 227 * 1024
    assert fused.capacity(64) == 64 and fused.capacity(65) == 128 and fused.capacity(257) is None
    assert fused.RESIDENT_BLOCKS * (fused.resident_smem_bytes() + 1024) <= 228 * 1024  # 1 KiB kept per block


def test_the_resident_rung_declares_the_narrow_shapes_it_holds():
    rung = next(r for r in variants.RUNGS if r.resident)
    variant = registry.load()[f"cupy/{rung.name}"]
    assert variant.unsupported(1 << 20, 64, 64, 64, {}) is None and variant.unsupported(7, 13, 5, 3, {}) is None
    assert "up to 64" in variant.unsupported(4096, 65, 64, 64, {}) and variant.unsupported(4096, 64, 64, 65, {})


def test_the_wgmma_rung_declares_rows_tma_cannot_read_and_fits_an_sm90_block():
    variant = registry.load()["cupy/b2b_fused_wgmma"]
    assert variant.unsupported(1 << 20, 64, 64, 64, {}) is None and variant.unsupported(7, 12, 5, 3, {}) is None
    assert "multiple of 4" in variant.unsupported(7, 13, 5, 3, {})
    assert "up to 64" in variant.unsupported(4096, 68, 64, 64, {})
    assert fused.wgmma_smem_bytes() <= 227 * 1024 and fused.WGMMA_STAGES % fused.WGMMA_CONSUMERS == 0


def _k_major(line, k):
    """05_fused_wgmma.cu's k_major: element (line, k) of a 64×64 K-major operand, two halves of 32 k, swizzled."""
    return (k // 32) * 64 * 32 + line * 32 + (((k % 32) // 4) ^ (line % 8)) * 4 + k % 4


def _permuted(kk):
    """05_fused_wgmma.cu's permuted: the k position of B1's row kk in B1ᵀ."""
    return kk // 8 * 8 + (kk % 2) * 4 + kk % 8 // 2


def test_the_wgmma_rungs_second_product_takes_the_first_ones_accumulators_as_its_a():
    """Rung 5's phase 2, modelled per thread: the accumulators of A1 (wgmma's D layout: warp w rows 16w…, lane (g, t)
    holds (g, 8j+2t), (g, 8j+2t+1), (g+8, 8j+2t), (g+8, 8j+2t+1) in d[j]) become the fragments a0..a3 as the kernel
    orders them, placed where the PTX ISA reads a0 (g, t), a1 (g+8, t), a2 (g, t+4), a3 (g+8, t+4); B of k-step j is
    read at k positions 8j… of B1ᵀ, written through `permuted`. Their sum over the 8 k-steps is A1·B1."""
    rng = np.random.default_rng(5)
    a1, b1 = rng.random((64, 64)) - 0.5, rng.random((64, 64)) - 0.5
    b1t = np.full(64 * 64, np.nan)
    for kk, n in itertools.product(range(64), range(64)):
        b1t[_k_major(n, _permuted(kk))] = b1[kk, n]
    assert not np.isnan(b1t).any()  # a place for every element, none written twice
    d = np.zeros((64, 64))
    for j in range(8):
        a = np.full((64, 8), np.nan)
        for warp, lane in itertools.product(range(4), range(32)):
            t, r, c = lane % 4, warp * 16 + lane // 4, 8 * j + 2 * (lane % 4)  # r: row g of the warp's 16
            acc = (a1[r, c], a1[r, c + 1], a1[r + 8, c], a1[r + 8, c + 1])
            fragment = (acc[0], acc[2], acc[1], acc[3])
            a[r, t], a[r + 8, t], a[r, t + 4], a[r + 8, t + 4] = fragment
        b = np.array([[b1t[_k_major(n, 8 * j + p)] for n in range(64)] for p in range(8)])
        d += a @ b
    np.testing.assert_allclose(d, a1 @ b1, rtol=1e-12, atol=1e-12)


@pytest.mark.skipif(NVCC is None, reason="no nvcc (requirements-test.txt installs one)")
@pytest.mark.parametrize("rung", variants.RUNGS, ids=lambda r: r.name)
def test_fused_kernels_compile_for_sm90_without_spilling(rung, tmp_path):
    a0 = "const __grid_constant__ TensorMap" if rung.wgmma else "const float*"
    lines = [f'#include "{rung.file}"'] + [
        f"template __global__ void {fused.expression(rung, *inst)}(int, int, int, int, {a0}, const float*, "
        "const float*, float*);" for inst in fused.instances(rung)]
    includes = [option[2:] for option in fused.compile_options(rung) if option.startswith("-I")]
    report = nvcc_sm90(lines, tuple(includes), tmp_path, rung.name, "sm_90a" if rung.wgmma else "sm_90")
    assert len(re.findall(r"Compiling entry function", report)) == len(fused.instances(rung))
    assert_no_spills(report)


@pytest.mark.slow
def test_the_b2b_dag_runs_on_the_cpu_to_its_report(tmp_path):
    cfg = {"device": "cpu", "workloads": ["b2b"], "families": ["cpu"], "modes": ["fp32"],
           "b2b": {"m": [256, 512], "k0": [64], "n0": [64, 128], "n1": [32], "validation_shapes": [[7, 13, 5, 3]]},
           "timing": {"budget_s": 0.2, "min_time_s": 0.05, "warmup_s": 0.05}}
    result = snakemake(tmp_path, "--cores", "2", config=cfg)
    assert result.returncode == 0, result.stderr[-3000:]
    summary = pd.read_csv(tmp_path / "results/tables/summary.csv")
    assert len(summary) == 4 and set(summary.workload) == {"b2b"}
    assert (summary.status == "ok").all(), summary[["variant", "m", "n0", "status", "message"]].to_string()
    assert summary.n.isna().all() and sorted(summary.n0.unique()) == [64, 128]
    validation = pd.read_csv(tmp_path / "results/tables/validation.csv")
    assert len(validation) == 5 and (validation.status == "ok").all()
    for figure in views.get("b2b").figures:  # a CPU run has no cuBLAS: the speedup figure is not drawn, not empty
        name = views.figure_name("b2b", figure)
        assert (tmp_path / f"reports/figures/{name}.png").exists() == (figure != "b2b_speedup"), name
    assert "b2b_unfused_numpy-blas" in (tmp_path / "reports/report.html").read_text()


@pytest.mark.slow
def test_a_b2b_dry_run_on_a_gpu_plans_every_variant_and_mode(tmp_path):
    result = snakemake(tmp_path, "-n", "--config", "device=cuda", "workloads=[b2b]")
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout + result.stderr
    assert "results/bench/cupy/b2b_fused_mma/tf32.json" in out
    assert "results/bench/cublas/b2b_unfused/fp32.json" in out
    assert "results/bench/cupy/b2b_fused_simt/tf32" not in out  # the FFMA rung has no tf32 mode


def test_the_report_says_where_a_fused_variant_is_slower_and_why():

    device = {"gpu_uuid": "GPU-1", "copy_bandwidth_gbps": 4000.0}
    rows = []
    for variant, shape, median_s in (("b2b_unfused", (4096, 4096, 256, 256), 1e-3),
                                     ("b2b_fused_mma", (4096, 4096, 256, 256), 2e-3),
                                     ("b2b_unfused", (65536, 64, 64, 64), 4e-5),
                                     ("b2b_fused_mma", (65536, 64, 64, 64), 5e-5)):
        sizes = dict(zip(B2B.axes, shape))
        rows.append({"gpu": "NVIDIA H200", "gpu_uuid": "GPU-1", "workload": "b2b", "mode": "tf32", "cache": "hot",
                     "family": "cublas" if variant == "b2b_unfused" else "cupy", "variant": variant, **sizes,
                     "role": "baseline" if variant == "b2b_unfused" else "",
                     "status": "ok", "median_s": median_s, "flops": B2B.flops(sizes),
                     "min_bytes": B2B.min_bytes(sizes), "peak_tflops": 100.0})  # ridge: 25 FLOP/byte
    summary = pd.DataFrame(rows)
    unfused_s = summary[summary.variant == "b2b_unfused"].set_index("m").median_s
    summary = summary.assign(tflops=summary.flops / summary.median_s / 1e12,
                             gbps=summary.min_bytes / summary.median_s / 1e9,
                             speedup_vs_baseline=summary.m.map(unfused_s) / summary.median_s)
    summary["speedup_vs_unfused_best"] = summary.speedup_vs_baseline
    [table] = views.get("b2b").sections(summary, [device])
    assert [row["shape"] for row in table["rows"]] == ["4096×4096×256×256", "65536×64×64×64"]
    assert table["rows"][0]["cells"]["cupy/b2b_fused_mma"]["speedup"] == "0.50×"
    assert table["title"].startswith("b2b · ")  # not to be taken for the gemm tables of the same GPU and mode
    slower = {f"{point['variant']} @ {point['shape']}": point["why"] for point in table["slower"]}
    assert list(slower) == ["cupy/b2b_fused_mma @ 4096×4096×256×256", "cupy/b2b_fused_mma @ 65536×64×64×64"]
    assert slower["cupy/b2b_fused_mma @ 4096×4096×256×256"].startswith("compute-bound even unfused")
    assert slower["cupy/b2b_fused_mma @ 65536×64×64×64"].startswith("memory-bound unfused")


def test_compare_matches_b2b_points_by_their_whole_shape(tmp_path, capsys):
    from gemmbench.__main__ import main

    def summary(path, fused_s):
        rows = [{**_bench_row("b2b_fused_mma", "cupy", "tf32", 4096, k0, 64, 64, s), "gpu_uuid": "GPU-1",
                 "sm_clock_mhz": 1980, "throttle_reasons": ""} for k0, s in ((64, fused_s), (1024, 1e-3))]
        pd.DataFrame(rows).to_csv(path, index=False)
        return str(path)

    a, b = summary(tmp_path / "a.csv", 1e-5), summary(tmp_path / "b.csv", 1.01e-5)
    assert main(["compare", a, b, "--min-size", "0", "--tolerance-pct", "3"]) == 0
    out = capsys.readouterr().out
    assert "2 points: largest |difference| 1.00%" in out  # k0 = 64 with k0 = 64 only, never with k0 = 1024
    assert main(["compare", str(tmp_path), b, "--min-size", "0"]) == 2  # a folder without summary.csv: one line
    assert "no summary table" in capsys.readouterr().err

"""Aggregation of stage outputs from several devices: one table, grouped by the device each point ran on."""
import json

import pandas as pd
import pytest

from gemmbench.present import tables
from gemmbench.present.analysis import pct_of_baseline
from gemmbench.stages import aggregate


def _facts(device, gpu, uuid, host, peak=None, bandwidth=3000.0):
    return {"device": device, "gpu": gpu, "gpu_uuid": uuid, "host": host, "peak_tflops": peak or {},
            "copy_bandwidth_gbps": bandwidth}


H100 = _facts("cuda", "NVIDIA H100", "GPU-h100", "node1", {"fp32": 60.0})
H200_A = _facts("cuda", "NVIDIA H200", "GPU-h200-a", "node2", {"fp32": 67.0}, 4000.0)
H200_B = _facts("cuda", "NVIDIA H200", "GPU-h200-b", "node2", {"fp32": 67.0}, 4100.0)
NODE1_CPU = _facts("cpu", "AMD EPYC", "node1", "node1", bandwidth=200.0)


def _write_bench(path, facts, family, variant, n, median_s, ci_rel=0.01):
    """A bench output as the measure stage writes it: its row and the facts of the device it ran on."""
    row = {"gpu": facts["gpu"], "gpu_uuid": facts["gpu_uuid"], "host": facts["host"], "device": facts["device"],
           "workload": "gemm", "family": family, "variant": variant, "mode": "fp32", "m": n, "n": n, "k": n,
           "role": "baseline" if family == "cublas" else "",
           "shape_kind": "sweep", "cache": "hot", "seed": 1, "status": "ok", "message": "", "median_s": median_s,
           "samples": 10, "median_ci_rel": ci_rel,
           "sample_device_s": [median_s] * 2, "warmup_host_s": [median_s] * 3}
    path.write_text(json.dumps({"rows": [row], "devices": [facts]}))
    return path


@pytest.fixture
def sweep(tmp_path):
    """A sweep spread over an H100 node (with a CPU variant) and a node with two H200s."""
    points = [(H100, "cublas", "gemm", 1.0), (H100, "cupy", "tiled", 2.0),
              (H200_A, "cublas", "gemm", 0.5), (H200_B, "cupy", "tiled", 1.0),  # one model, two GPUs
              (NODE1_CPU, "cpu", "numpy-blas", 100.0)]
    paths = [_write_bench(tmp_path / f"{i}.json", facts, family, variant, 1024, median)
             for i, (facts, family, variant, median) in enumerate(points)]
    extra = _write_bench(tmp_path / "again.json", {**H200_A, "copy_bandwidth_gbps": 3900.0}, "cupy", "naive", 1024, 9.0)
    out = tmp_path / "tables"
    result = aggregate.run(build_paths=[], validation_paths=[], bench_paths=[*paths, extra], outdir=out,
                              device_reason="no GPU")
    return result["summary"].set_index(["gpu_uuid", "variant"]), json.loads((out / "devices.json").read_text())


def test_one_table_keeps_every_gpu_apart(sweep):
    summary, _ = sweep
    assert len(summary) == 6
    per_model = summary.reset_index().groupby("gpu").gpu_uuid.nunique().to_dict()
    assert per_model == {"AMD EPYC": 1, "NVIDIA H100": 1, "NVIDIA H200": 2}
    assert summary.loc[("GPU-h100", "tiled"), "pct_of_peak"] == pytest.approx(100 * 2 * 1024**3 / 2.0 / 1e12 / 60.0)
    assert summary.loc[("GPU-h200-b", "tiled"), "pct_of_peak"] == pytest.approx(100 * 2 * 1024**3 / 1.0 / 1e12 / 67.0)


def test_pct_of_baseline_is_against_the_same_gpu_model(sweep):
    summary, _ = sweep
    assert summary.loc[("GPU-h100", "tiled"), "pct_of_baseline"] == pytest.approx(50.0)  # H100 cuBLAS: 1.0 s
    # the other H200 of the box ran cuBLAS: same model, so it is the reference (0.5 s), not the H100's
    assert summary.loc[("GPU-h200-b", "tiled"), "pct_of_baseline"] == pytest.approx(50.0)
    assert summary.loc[("GPU-h200-a", "naive"), "pct_of_baseline"] == pytest.approx(100 * 0.5 / 9.0)
    # a CPU variant against the cuBLAS of its own host (node1: the H100)
    assert summary.loc[("node1", "numpy-blas"), "pct_of_baseline"] == pytest.approx(1.0)


def test_a_ratio_to_the_baseline_carries_the_interval_of_both_medians(tmp_path):
    paths = [_write_bench(tmp_path / "base.json", H100, "cublas", "gemm", 1024, 1.0, ci_rel=0.03),
             _write_bench(tmp_path / "var.json", H100, "cupy", "tiled", 1024, 2.0, ci_rel=0.04),
             _write_bench(tmp_path / "thin.json", H100, "cupy", "thin", 1024, 2.0, ci_rel=float("inf"))]
    summary = aggregate.run(build_paths=[], validation_paths=[], bench_paths=paths, outdir=tmp_path / "tables",
                            device_reason="")["summary"].set_index("variant")
    assert summary.loc["tiled", "pct_of_baseline_ci"] == pytest.approx(50.0 * 0.05)  # 3% and 4% in quadrature
    assert summary.loc["thin", "pct_of_baseline_ci"] == float("inf")  # a median one run does not pin
    rows = {r.variant: r for r in summary.reset_index().itertuples()}
    assert pct_of_baseline(rows["tiled"]) == "50% ±2.5"
    assert pct_of_baseline(rows["thin"]) == "50%"
    assert pd.isna(summary.loc["gemm", "pct_of_baseline_ci"])  # the baseline against itself
    # a table written before the column gets it when read
    old = tmp_path / "old.csv"
    summary.reset_index().drop(columns="pct_of_baseline_ci").to_csv(old, index=False)
    again = tables.read(old).set_index("variant")
    assert again.loc["tiled", "pct_of_baseline_ci"] == pytest.approx(50.0 * 0.05)


def test_devices_are_listed_once_each_with_their_best_bandwidth(sweep):
    _, devices = sweep
    by_uuid = {d["gpu_uuid"]: d for d in devices}
    assert sorted(by_uuid) == ["GPU-h100", "GPU-h200-a", "GPU-h200-b", "node1"]
    assert by_uuid["GPU-h200-a"]["copy_bandwidth_gbps"] == 4000.0  # best of the two jobs that measured it
    assert by_uuid["node1"]["device_reason"] == "no GPU" and by_uuid["GPU-h100"]["device_reason"] == ""


def test_a_point_that_never_ran_names_no_device(tmp_path):
    row = {"gpu": None, "gpu_uuid": None, "host": None, "device": "cuda", "family": "cupy", "variant": "tiled",
           "workload": "gemm", "mode": "fp32", "m": 64, "n": 64, "k": 64, "shape_kind": "sweep", "cache": "hot",
           "seed": 1, "status": "skipped", "message": "above the configured size cap"}
    (tmp_path / "b.json").write_text(json.dumps({"rows": [row], "devices": []}))
    result = aggregate.run(build_paths=[], validation_paths=[], bench_paths=[tmp_path / "b.json"],
                              outdir=tmp_path / "tables")
    assert result["summary"].status.tolist() == ["skipped"] and pd.isna(result["summary"].gpu[0])
    assert json.loads((tmp_path / "tables/devices.json").read_text()) == []


def test_compare_gives_the_agreement_between_two_gpus_apart(tmp_path, capsys):
    """A sweep split over two GPUs (run a) against one on the first GPU only (run b)."""
    from gemmbench.__main__ import main

    def run(uuids, times):
        rows = [{"gpu": "NVIDIA H200", "gpu_uuid": uuid, "family": "cupy", "variant": "tiled", "mode": "fp32",
                 "m": n, "n": n, "k": n, "status": "ok", "median_s": t, "sm_clock_mhz": 1980, "throttle_reasons": ""}
                for uuid, n, t in zip(uuids, (1024, 2048, 4096, 8192), times)]
        path = tmp_path / f"{len(list(tmp_path.iterdir()))}.csv"
        pd.DataFrame(rows).to_csv(path, index=False)
        return str(path)

    split = run(["GPU-a", "GPU-b", "GPU-a", "GPU-b"], [1.0, 1.0, 1.0, 1.0])
    first = run(["GPU-a"] * 4, [1.01, 1.02, 0.995, 1.04])
    assert main(["compare", split, first, "--tolerance-pct", "3"]) == 1  # 4% at 8192
    out = capsys.readouterr().out
    assert "4 points: largest |difference| 4.00%" in out
    assert "two different GPUs: 2 points: largest |difference| 4.00%, median |difference| 3.00%" in out
    assert "the same GPU:       2 points: largest |difference| 1.00%, median |difference| 0.75%" in out

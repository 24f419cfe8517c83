"""The whole Snakemake DAG on CPU families: end to end to the report, lint, dry runs, faults, resume."""
import json
import signal
import subprocess
import time

import pandas as pd
import pytest

from conftest import ROOT, SNAKEMAKE_ENV, snakemake, snakemake_command, write_config
from gemmbench import tables

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory):
    """One full run of config/cpu.yaml, shared by the tests that only read its outputs."""
    workdir = tmp_path_factory.mktemp("cpu-run")
    result = snakemake(workdir, "--cores", "2", "--configfile", str(ROOT / "config" / "cpu.yaml"))
    assert result.returncode == 0, result.stderr[-3000:]
    return workdir, result


def test_cpu_dag_runs_end_to_end_to_the_report(cpu_run):
    workdir, _ = cpu_run
    summary = pd.read_csv(workdir / "results/tables/summary.csv")
    tables.check_columns("summary", summary)
    # every planned point has exactly one row: 2 CPU variants x 3 sizes, fp32
    assert len(summary) == 6 and set(summary.variant) == {"numpy-blas", "numba-tiled"}
    assert (summary.status == "ok").all(), summary[["variant", "m", "status", "message"]]
    assert (summary.median_s > 0).all() and (summary.tflops > 0).all() and (summary.rel_error < 1e-4).all()
    assert summary.pct_of_cublas.isna().all()  # no cuBLAS on a CPU run: no ratio is invented
    validation = pd.read_csv(workdir / "results/tables/validation.csv")
    assert len(validation) == 2 * 7 and (validation.status == "ok").all()
    assert set(validation.shape_kind) == {"sweep", "awkward"}
    samples = pd.read_parquet(workdir / "results/tables/samples.parquet")
    assert len(samples) == summary.samples.sum()
    html = (workdir / "reports/report.html").read_text()
    assert "numba-tiled" in html and "data:image/png;base64" in html
    for figure in ("ladder", "tflops_vs_size", "pct_of_cublas", "roofline", "validation_error"):
        assert (workdir / f"reports/figures/{figure}.png").stat().st_size > 0
        assert (workdir / f"reports/figures/{figure}.svg").stat().st_size > 0


def test_no_change_rerun_does_nothing(cpu_run):
    workdir, _ = cpu_run
    result = snakemake(workdir, "--cores", "2", "--configfile", str(ROOT / "config" / "cpu.yaml"))
    assert result.returncode == 0
    assert "Nothing to be done" in result.stdout + result.stderr


def test_snakemake_report_works(cpu_run):
    workdir, _ = cpu_run
    result = snakemake(workdir, "--configfile", str(ROOT / "config" / "cpu.yaml"), "--report", "smk-report.zip")
    assert result.returncode == 0, result.stderr[-3000:]
    assert (workdir / "smk-report.zip").stat().st_size > 0


def test_lint():
    result = snakemake(ROOT, "--lint")
    assert result.returncode == 0, result.stdout + result.stderr


def test_dry_run_of_the_default_gpu_config_plans_the_full_sweep(tmp_path):
    result = snakemake(tmp_path, "-n", "--config", "device=cuda")
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout + result.stderr
    for mode in ("fp32", "tf32"):
        for n in (256, 16384):
            assert f"results/bench/cublas/gemm/{mode}/{n}x{n}x{n}.json" in out
    assert "results/bench/cpu/numpy-blas/fp32/1024x1024x1024.json" in out
    assert not (tmp_path / "results").exists()


def test_the_metaschedule_variant_runs_only_with_a_tuning_budget(tmp_path):
    """Its parameters come from tuning on the GPU: without a trial budget it is left out, and says how to add it;
    with one, its tune job (per GPU) comes before its build."""
    result = snakemake(tmp_path, "-n", "--config", "device=cuda", "tune={gpu: NVIDIA H100}")
    out = result.stdout + result.stderr
    assert result.returncode == 0 and "tvm/03_metaschedule" in out and "tune.autotuner.trials" in out
    assert "results/bench/tvm/01_d2l/fp32/4096x4096x4096.json" in out and "results/build/tvm/03" not in out
    result = snakemake(tmp_path, "-n", "--config", "device=cuda", "tune={gpu: NVIDIA H100, autotuner: {trials: 64}}")
    out = result.stdout + result.stderr
    assert result.returncode == 0, result.stderr[-3000:]
    assert "results/tune/nvidia-h100/tvm/03_metaschedule/fp32.json" in out
    assert "results/bench/tvm/03_metaschedule/fp32/16384x16384x16384.json" in out
    result = snakemake(tmp_path, "-n", "--config", "device=cuda", "variants=[tvm/03_metaschedule]")
    assert result.returncode != 0 and "tune.autotuner.trials" in result.stdout + result.stderr


def test_auto_without_a_gpu_runs_cpu_families_and_says_so(tmp_path):
    result = snakemake(tmp_path, "-n", "--config", "device=auto")
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout + result.stderr
    assert "NO GPU" in out and "cublas/gemm" not in out.replace("GPU families ['cublas']", "")


def test_faulty_variants_end_as_status_rows_and_the_report_is_still_made(tmp_path, cpu_config):
    cpu_config.update(variant_modules=["tests.planted"], sizes=[32, 96], validation_shapes=[[7, 13, 5]],
                      variants=["cpu/numpy-blas", "cpu/planted-wrong", "cpu/planted-hang", "cpu/planted-crash"])
    cpu_config["timing"]["point_timeout_s"] = 4
    result = snakemake(tmp_path, "--cores", "2", config=cpu_config)
    assert result.returncode == 0, result.stderr[-3000:]
    summary = pd.read_csv(tmp_path / "results/tables/summary.csv").set_index(["variant", "m"])
    validation = pd.read_csv(tmp_path / "results/tables/validation.csv").set_index(["variant", "m"])
    assert len(summary) == 4 * 2 and len(validation) == 4 * 3
    assert (validation.loc["planted-wrong"].status == "failed").all()
    assert summary.loc[("planted-wrong", 96), "status"] == "skipped"  # caught by validation, never timed
    assert summary.loc[("planted-wrong", 96), "message"].startswith("not benchmarked: validation failed")
    assert (validation.loc["planted-hang"].status == "timeout").all()
    assert validation.loc[("planted-crash", 96), "status"] == "error"
    assert summary.loc[("planted-crash", 32), "status"] == "ok"
    assert (summary.loc["numpy-blas"].status == "ok").all()
    html = (tmp_path / "reports/report.html").read_text()
    assert "planted-wrong" in html and "timeout" in html


def test_interrupted_run_resumes_with_only_the_missing_points(tmp_path, cpu_config):
    cpu_config.update(variant_modules=["tests.planted"], variants=["cpu/planted-slow"],
                      sizes=[16, 24, 32, 40, 48, 56], validation_shapes=[])
    cpu_config["timing"].update(min_samples=10, max_samples=10)  # 0.05 s a call: about 1 s per bench job
    config_path = write_config(tmp_path, cpu_config)
    proc = subprocess.Popen(snakemake_command(tmp_path) + ["--cores", "1", "--configfile", str(config_path)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=SNAKEMAKE_ENV)
    bench_dir = tmp_path / "results/bench/cpu/planted-slow/fp32"
    deadline = time.monotonic() + 120
    while len(list(bench_dir.glob("*.json"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)  # Ctrl-C: Snakemake stops, the running job is lost
    proc.wait(timeout=60)
    done = {p.name: p.stat().st_mtime_ns for p in bench_dir.glob("*.json")}
    assert 2 <= len(done) < 6, f"interrupt came too late or too early: {sorted(done)}"

    result = snakemake(tmp_path, "--cores", "1", "--configfile", str(config_path))
    assert result.returncode == 0, result.stderr[-3000:]
    after = {p.name: p.stat().st_mtime_ns for p in bench_dir.glob("*.json")}
    assert len(after) == 6
    # Only the job that Ctrl-C interrupted may be redone (Snakemake marks it incomplete); finished ones stay.
    redone = [name for name, mtime in done.items() if after[name] != mtime]
    assert len(redone) <= 1, f"finished points were redone: {redone}"
    rerun_benches = (result.stdout + result.stderr).count("rule bench:")
    assert rerun_benches == 6 - len(done) + len(redone)
    assert len(pd.read_csv(tmp_path / "results/tables/summary.csv")) == 6


def test_tables_schema_is_the_one_the_issue_promises():
    required = set(tables.SCHEMA["summary"]["required"])
    assert {"gpu", "family", "variant", "mode", "m", "n", "k", "status", "median_s", "tflops",
            "pct_of_cublas", "pct_of_peak", "rel_error"} <= required
    assert json.dumps(tables.SCHEMA)  # plain data

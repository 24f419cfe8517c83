"""The whole Snakemake DAG on CPU families: end to end to the report, lint, dry runs, faults, resume."""
import json
import os
import re
import signal
import subprocess
import sys
import time
import zipfile

import pandas as pd
import pytest
from conftest import ROOT, SNAKEMAKE_ENV, planned_jobs, snakemake, snakemake_command, tree_copy, write_config

from gemmbench.measure import provenance
from gemmbench.present import tables, time_spent
from kernels import registry

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory):
    """One full run of config/test.yaml (the small test config), shared by the tests that only read its outputs."""
    workdir = tmp_path_factory.mktemp("cpu-run")
    result = snakemake(workdir, "--cores", "2", "--configfile", str(ROOT / "config" / "test.yaml"))
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
    assert summary.pct_of_baseline.isna().all()  # no cuBLAS on a CPU run: no ratio is invented
    # what made the numbers: the tree's commit in every row, the toolchain in every build
    source = provenance.source(str(ROOT))
    assert set(summary.git_commit.fillna("")) == {source["git_commit"] or ""}
    builds = pd.read_csv(workdir / "results/tables/builds.csv")
    assert all(json.loads(t)["numpy"] == provenance.toolchain()["numpy"] for t in builds.toolchain)
    validation = pd.read_csv(workdir / "results/tables/validation.csv")
    assert len(validation) == 2 * 7 and (validation.status == "ok").all()
    assert set(validation.shape_kind) == {"sweep", "awkward"}
    samples = pd.read_parquet(workdir / "results/tables/samples.parquet")
    # on a CPU one call's median stands (the timer is the call itself); a short kernel's batched one beside it
    short = summary.batch_launches > 1
    assert (samples.timer == "device").sum() == summary.samples.sum() and (samples.timer == "host").any()
    assert short.any() and summary.batched_median_s[short].notna().all() and (samples.timer == "batched").any()
    assert (summary.median_s[short] != summary.batched_median_s[short]).all()
    html = (workdir / "reports/report.html").read_text()
    assert "numba-tiled" in html and "data:image/png;base64" in html
    # when the points were measured, from their rows, in the header; the spread a few slow samples cannot decide
    measured = pd.to_datetime(summary.measured_at, utc=True)
    assert f"Measured {measured.min():%Y-%m-%d %H:%M} to {measured.max():%Y-%m-%d %H:%M} UTC" in html
    assert summary.iqr_rel.notna().all() and (summary.slow_samples >= 0).all() and "IQR " in html
    # a CPU run says so first, and shows no column a GPU run would fill
    glance = html.split('id="answer"')[1].split("</section>")[0]
    assert "A CPU run: the CPU families on" in html and "% of cuBLAS" not in glance and "CPU's bound" in glance
    for figure in ("tflops_vs_size", "roofline", "validation_error"):
        assert (workdir / f"reports/figures/{figure}.png").stat().st_size > 0
        assert (workdir / f"reports/figures/{figure}.svg").stat().st_size > 0
    for figure in ("ladder", "pct_of_baseline"):  # they compare with cuBLAS, which a CPU run has not: not drawn empty
        assert not (workdir / f"reports/figures/{figure}.png").exists()
    # where the time went: each job's wall (Snakemake's benchmark files), the measure jobs' by part
    walls = time_spent.job_walls(workdir / "results/benchmarks")
    assert {"build", "measure", "aggregate"} <= set(walls.stage) and (walls.wall_s > 0).all()
    spent = html.split('id="time"')[1].split("</section>")[0]
    assert 'class="timebar"' in spent and ">kernel<" in spent and ">job overhead<" in spent


def test_no_change_rerun_does_nothing(cpu_run):
    workdir, _ = cpu_run
    result = snakemake(workdir, "--cores", "2", "--configfile", str(ROOT / "config" / "test.yaml"))
    assert result.returncode == 0
    assert "Nothing to be done" in result.stdout + result.stderr


def test_a_new_toolchain_rebuilds_and_so_revalidates_and_remeasures(cpu_run, tmp_path):
    """Another compiler (here an nvcc of another release, found through CUDA_PATH) re-runs every build, and with
    them validation and bench, whose point keys digest the build record."""
    workdir, _ = cpu_run
    fake = tmp_path / "cuda" / "bin" / "nvcc"
    fake.parent.mkdir(parents=True)
    fake.write_text("#!/bin/sh\necho 'Cuda compilation tools, release 99.9, V99.9.99'\n")
    fake.chmod(0o755)
    command = snakemake_command(workdir) + ["-n", "--configfile", str(ROOT / "config" / "test.yaml")]
    env = {**SNAKEMAKE_ENV, "CUDA_PATH": str(fake.parents[1])}
    result = subprocess.run(command, capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    planned = {job["rule"] for job in planned_jobs(result.stdout + result.stderr)}
    assert {"build", "measure", "aggregate", "report"} <= planned


def test_snakemake_report_works(cpu_run):
    workdir, _ = cpu_run
    result = snakemake(workdir, "--configfile", str(ROOT / "config" / "test.yaml"), "--report", "smk-report.zip")
    assert result.returncode == 0, result.stderr[-3000:]
    with zipfile.ZipFile(workdir / "smk-report.zip") as archive:
        names = archive.namelist()
    for registered in ("summary.csv", "samples.csv", "validation.csv", "builds.csv", "report.html", "roofline.png"):
        assert any(name.endswith(registered) for name in names), f"{registered} is not in Snakemake's report"


def test_lint():
    result = snakemake(ROOT, "--lint")
    assert result.returncode == 0, result.stdout + result.stderr


def test_dry_run_of_the_default_gpu_config_plans_the_full_sweep(tmp_path):
    result = snakemake(tmp_path, "-n", "--config", "device=cuda")
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout + result.stderr
    for mode in ("fp32", "tf32"):
        assert f"results/bench/cublas/gemm/{mode}.json" in out
    assert "results/bench/cpu/numpy-blas/fp32.json" in out
    assert not (tmp_path / "results").exists()
    # What determines a kernel is what re-runs it: its source, its family's launch code and the shared helpers.
    build = re.search(r"rule build:\n    input: ([^\n]*)\n    output: results/build/cupy/03_smem_tiles/fp32.json", out)
    assert build and {"03_smem_tiles.cu", "common.cuh", "nvrtc.py", "variants.py", "tiles.py"} <= {
        p.rsplit("/", 1)[-1] for p in build.group(1).split(", ")}, build
    # Builds launch nothing, so they share the GPU and run beside the one job that measures on it.
    jobs = [job for job in planned_jobs(out) if job["rule"] in ("build", "measure")]
    assert {job["gpu"] for job in jobs if job["rule"] == "build"} == {"0"}
    assert {job["gpu"] for job in jobs if job["rule"] != "build" and "family=cpu" not in job["wildcards"]} == {"1"}


def test_the_metaschedule_variant_runs_only_with_a_tuning_budget_or_a_committed_tuning(tmp_path):
    """Its parameters come from tuning on the GPU: on a GPU model with no committed tuning and no trial budget it
    is left out, and says how to add it; with a budget, its tune job (per GPU) comes before its build."""
    gpu = "A GPU nobody tuned for"
    result = snakemake(tmp_path, "-n", "--config", "device=cuda", f"tune={{gpu: {gpu}}}")
    out = result.stdout + result.stderr
    assert result.returncode == 0 and "tvm/04_metaschedule" in out and "tune.autotuner.trials" in out
    assert "results/bench/tvm/01_d2l/fp32.json" in out and "results/build/tvm/04" not in out
    result = snakemake(tmp_path, "-n", "--config", "device=cuda", f"tune={{gpu: {gpu}, autotuner: {{trials: 64}}}}")
    out = result.stdout + result.stderr
    assert result.returncode == 0, result.stderr[-3000:]
    assert "results/tune/a-gpu-nobody-tuned-for/tvm/04_metaschedule/fp32.json" in out
    assert "results/bench/tvm/04_metaschedule/fp32.json" in out
    result = snakemake(tmp_path, "-n", "--config", "device=cuda", "variants=[tvm/04_metaschedule]")
    assert result.returncode != 0 and "tune.autotuner.trials" in result.stdout + result.stderr


def test_a_search_compiles_its_candidates_beside_the_gpus_jobs_and_the_tune_job_only_times_them(tmp_path):
    """On a GPU model with no records, each generic search's candidates are compiled by a job of their own that asks
    for no GPU (as builds), and its tune job waits for it; MetaSchedule's search (rounds) and a committed record
    plan none. The compiles the GPU's searches wait for go before the jobs that feed only measure jobs, and the GPU's
    jobs before every other (common.smk, gpu_first)."""
    result = snakemake(tmp_path, "-n", "--cores", "8", "--config", "device=cuda", "tune={gpu: A GPU nobody tuned for}")
    assert result.returncode == 0, result.stderr[-3000:]
    jobs = planned_jobs(result.stdout + result.stderr)
    compiles = {job["wildcards"] for job in jobs if job["rule"] == "tune_compile"}
    searches = {job["wildcards"] for job in jobs if job["rule"] == "tune" and job["gpu"] == "1"}
    assert compiles == searches and "variant=03_smem_tiles" in " ".join(compiles)
    assert {job["gpu"] for job in jobs if job["rule"] == "tune_compile"} == {"0"}
    assert "results/tune/a-gpu-nobody-tuned-for/cupy/03_smem_tiles/fp32.compiled.json" in result.stdout
    # A variant compiled per shape (TVM's) times its trials in a job of their own, so that its checks' kernels are
    # compiled beside the GPU's jobs before its tune job checks and audits the picks.
    per_shape = {f"tvm/{v.name}" for v in registry.load().values() if v.family == "tvm" and v.prepare}
    for rule, gpu in (("tune_trials", "1"), ("tune_check_compile", "0")):
        planned = [job for job in jobs if job["rule"] == rule]
        assert {job_key(job) for job in planned} == {job_key(job) for job in jobs if job["rule"] == "tune_compile"
                                                     and job_key(job) in per_shape}, rule
        assert {job["gpu"] for job in planned} == {gpu}
    assert "tvm/02_d2l_vectorized" in per_shape and "results/tune/a-gpu-nobody-tuned-for/tvm/02_d2l_vectorized/" \
        "fp32.checks.json" in result.stdout
    priority = {rule: {job["priority"] for job in jobs if job["rule"] == rule}
                for rule in ("tune_compile", "tune_check_compile", "build", "tune_code")}
    assert min(priority["tune_compile"] | priority["tune_check_compile"]) > \
        max(priority["build"] | priority["tune_code"])
    on_gpu = [job for job in jobs if job["gpu"] == "1"]
    assert {job["rule"] for job in on_gpu} == {"tune", "tune_trials", "measure"}
    assert min(job["priority"] for job in on_gpu) > max(job["priority"] for job in jobs if job["gpu"] == "0")
    result = snakemake(tmp_path, "-n", "--config", "device=cuda", "tune={gpu: NVIDIA H100 80GB HBM3}")
    out = result.stdout + result.stderr
    assert result.returncode == 0 and "rule tune_compile" not in out and "rule tune_trials" not in out


def job_key(job: dict) -> str:
    """A planned job's variant key, e.g. tvm/05_recipe, from its wildcards."""
    fields = dict(item.split("=", 1) for item in job["wildcards"].split(", ") if "=" in item)
    return f"{fields.get('family')}/{fields.get('variant')}"


def test_auto_without_a_gpu_runs_cpu_families_and_says_so(tmp_path):
    result = snakemake(tmp_path, "-n", "--config", "device=auto")
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout + result.stderr
    assert "NO GPU" in out and "cublas/gemm" not in out.replace("GPU families ['cublas']", "")


def test_faulty_variants_end_as_status_rows_and_the_report_is_still_made(tmp_path, cpu_config):
    cpu_config.update(variant_modules=["tests.planted"], square_sizes=[32, 96], validation_shapes=[[7, 13, 5]],
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


def test_the_gpu_paths_job_commands_as_snakemake_writes_them_reach_their_stages(tmp_path, monkeypatch):
    """The shell commands of the GPU's jobs (a search's tune_trials and tune, measure), as a dry run on a GPU model
    with no records prints them, each parse into the call of its stage: a tune job with no tune_trials file to pass
    included (Snakemake quotes an empty argument as nothing)."""
    import shlex

    from gemmbench import job, logs
    from gemmbench.stages import measure, tune

    result = snakemake(tmp_path, "-n", "-p", "--config", "device=cuda", "tune={gpu: A GPU nobody tuned for}",
                       "variants=[cupy/03_smem_tiles,tvm/02_d2l_vectorized]", "modes=[fp32]")
    assert result.returncode == 0, result.stderr[-3000:]
    prefix = "Shell command: python -m gemmbench.job "
    commands = [shlex.split(line.split(prefix, 1)[1]) for line in result.stdout.splitlines() if prefix in line]
    called = []
    monkeypatch.setattr(logs, "setup", lambda path: None)
    for module, name in ((tune, "run"), (tune, "trials"), (measure, "run")):
        monkeypatch.setattr(module, name, lambda *args, stage=f"{module.__name__}.{name}", **kwargs:
                            called.append((stage, args[1], kwargs.get("timed", ""))))
    for argv in commands:
        job.main(argv)
    assert sorted(set(called)) == [
        ("gemmbench.stages.measure.run", "cupy/03_smem_tiles", ""),
        ("gemmbench.stages.measure.run", "tvm/02_d2l_vectorized", ""),
        ("gemmbench.stages.tune.run", "cupy/03_smem_tiles", None),
        ("gemmbench.stages.tune.run", "tvm/02_d2l_vectorized",
         "results/tune/a-gpu-nobody-tuned-for/tvm/02_d2l_vectorized/fp32.trials.json"),
        ("gemmbench.stages.tune.trials", "tvm/02_d2l_vectorized", "")]


def test_a_killed_run_continues_with_the_same_command_and_measures_only_the_missing_points(tmp_path, cpu_config):
    """kill -9 of the whole run (Snakemake and its jobs) during bench, then the README's command again, as it was:
    no --unlock or other step; the points finished before the kill are kept byte for byte, only the rest measured."""
    cpu_config.update(variant_modules=["tests.planted"], variants=["cpu/planted-slow"],
                      square_sizes=[16, 24, 32, 40, 48, 56], validation_shapes=[])
    cpu_config["timing"].update(min_samples=10, max_samples=10)  # 0.05 s a call: about 1 s per point
    config_path = write_config(tmp_path, cpu_config)
    command = snakemake_command(tmp_path) + ["--cores", "all", "--configfile", str(config_path)]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=SNAKEMAKE_ENV,
                            start_new_session=True)
    points = tmp_path / "results/bench/cpu/planted-slow/fp32"
    while len(list(points.glob("*.json"))) < 2 and proc.poll() is None:  # bounded by the run itself
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    done = {p.name: p.read_bytes() for p in points.glob("*.json")}
    assert 2 <= len(done) < 6, f"the kill came too late: {sorted(done)}"
    assert list((tmp_path / ".snakemake/locks").glob("*.lock")), "the kill left no lock: nothing was tested"

    result = subprocess.run(command, capture_output=True, text=True, env=SNAKEMAKE_ENV)
    log = result.stdout + result.stderr
    assert result.returncode == 0, log[-3000:]
    assert "its lock is removed and this run continues it" in log
    timed = re.findall(r"\[\d+/(\d+)\] cpu/planted-slow fp32 bench ", log)  # each shape validated again, then timed
    assert f"{len(done)} of 6 points kept" in log and timed == [str(12 - len(done))] * (6 - len(done)), timed
    assert {name: (points / name).read_bytes() for name in done} == done
    summary = pd.read_csv(tmp_path / "results/tables/summary.csv")
    assert len(summary) == 6 and (summary.status == "ok").all()


def test_tables_schema_is_the_one_the_issue_promises():
    required = set(tables.SCHEMA["summary"]["required"])
    assert {"gpu", "family", "variant", "mode", "m", "n", "k", "status", "median_s", "tflops",
            "pct_of_baseline", "pct_of_peak", "rel_error"} <= required
    assert json.dumps(tables.SCHEMA)  # plain data


def test_editing_a_familys_launch_code_reruns_build_validate_and_bench_of_its_variants(tmp_path):
    """On a copy of the workflow whose outputs are all up to date (--touch), appending to kernels/cupy/nvrtc.py
    (the CuPy rungs' launch code, not a kernel file) re-runs each rung's tune, build, validation and bench."""
    tree = tree_copy(tmp_path / "tree")
    command = [sys.executable, "-m", "snakemake", "-s", str(tree / "Snakefile"), "--directory", str(tree), "--cores",
               "1", "--config", "device=cuda", "families=[cupy]", "variants=[cupy/03_smem_tiles, cupy/04_rect_tiles]"]
    env = {**SNAKEMAKE_ENV, "PYTHONPATH": str(tree)}
    planned = subprocess.run(command + ["-n"], capture_output=True, text=True, env=env)
    for outputs in re.findall(r"\n    output: ([^\n]*)", planned.stdout + planned.stderr):
        for output in outputs.split(", "):
            (tree / output).parent.mkdir(parents=True, exist_ok=True)
            (tree / output).touch()
    assert subprocess.run(command + ["--touch"], capture_output=True, text=True, env=env).returncode == 0
    up_to_date = subprocess.run(command + ["-n"], capture_output=True, text=True, env=env)
    assert "Nothing to be done" in up_to_date.stdout + up_to_date.stderr
    with open(tree / "kernels/cupy/nvrtc.py", "a") as launch_code:
        launch_code.write("# an edit to the launch code\n")
    again = subprocess.run(command + ["-n"], capture_output=True, text=True, env=env)
    jobs = planned_jobs(again.stdout + again.stderr)
    for rule in ("tune", "build", "measure"):
        assert sorted(job["wildcards"].split("variant=")[1].split(",")[0] for job in jobs if job["rule"] == rule) == [
            "03_smem_tiles", "04_rect_tiles"], rule


def test_a_workload_from_one_module_outside_the_harness_runs_through_the_dag_to_the_report(tmp_path, cpu_config):
    """tests/toy_workload.py registers the gemv workload and its one variant; the config names that module and the
    workload, and the run plans, validates, times, tabulates, draws and reports it like gemm."""
    cpu_config.update(variant_modules=["tests.toy_workload"], workloads=["gemv"], families=["toy"],
                      square_sizes=[64, 128])
    result = snakemake(tmp_path, "--cores", "2", config=cpu_config)
    assert result.returncode == 0, result.stderr[-3000:]
    summary = pd.read_csv(tmp_path / "results/tables/summary.csv")
    assert list(summary["workload"]) == ["gemv", "gemv"] and (summary["status"] == "ok").all()
    assert list(summary["m"]) == [64, 128] and summary["n"].isna().all()
    validation = pd.read_csv(tmp_path / "results/tables/validation.csv")
    assert sorted(zip(validation["m"], validation["k"])) == [(7, 13), (64, 64), (128, 128)]
    assert (validation["status"] == "ok").all()
    html = (tmp_path / "reports/report.html").read_text()
    assert "toy/numpy-gemv" in html and "2·m·k" in html
    unknown = snakemake(tmp_path, "-n", config={**cpu_config, "workloads": ["nosuch"]})
    assert unknown.returncode != 0 and "workloads: ['nosuch'] not registered" in unknown.stdout + unknown.stderr


def test_a_family_from_a_module_outside_kernels_runs_through_the_dag_to_the_report(tmp_path, cpu_config):
    """No list of families to extend: a module named in variant_modules registers "toy", and the config runs it."""
    cpu_config.update(variant_modules=["tests.toy_family"], families=["cpu", "toy"], square_sizes=[64],
                      validation_shapes=[[7, 13, 5]])
    result = snakemake(tmp_path, "--cores", "2", config=cpu_config)
    assert result.returncode == 0, result.stderr[-3000:]
    summary = pd.read_csv(tmp_path / "results/tables/summary.csv")
    toy = summary[summary["family"] == "toy"]
    assert list(toy["variant"]) == ["numpy-matmul"] and (toy["status"] == "ok").all()
    assert "toy/numpy-matmul" in (tmp_path / "reports/report.html").read_text()
    unknown = snakemake(tmp_path, "-n", config={**cpu_config, "families": ["cpu", "nosuch"]})
    assert unknown.returncode != 0 and "families: ['nosuch'] registered no variant" in unknown.stdout + unknown.stderr


def test_the_profile_target_plans_one_gpu_job_per_gpu_variant_and_mode(tmp_path):
    """`snakemake profile`: Nsight Compute's counters of every GPU variant and mode, each job holding the GPU as a
    measure job does, then the table; the default run leaves them out unless profile.enabled."""
    result = snakemake(tmp_path, "profile", "-n", "--config", "device=cuda")
    assert result.returncode == 0, result.stderr[-3000:]
    jobs = [job for job in planned_jobs(result.stdout + result.stderr) if job["rule"] == "profile_variant"]
    assert jobs and {job["gpu"] for job in jobs} == {"1"}
    assert "family=cupy, variant=13_split_barriers, mode=fp32" in {job["wildcards"] for job in jobs}
    assert not any("family=cpu" in job["wildcards"] for job in jobs)
    default = snakemake(tmp_path, "-n", "--config", "device=cuda")
    assert "profile_variant" not in default.stdout and "results/tables/profile.csv" not in default.stdout
    enabled = snakemake(tmp_path, "-n", "--config", "device=cuda", "profile={enabled: true}")
    assert "rule profile_variant:" in enabled.stdout and "results/tables/profile.parquet" in enabled.stdout

"""The SLURM profile, planned here (.ci/slurm-test submits through it to a real SLURM)."""
import pytest
from conftest import ROOT, planned_jobs, snakemake

PROFILE = ["--workflow-profile", str(ROOT / "workflow/profiles/slurm")]
GPU_RUN = ["--config", "device=cuda", "tune={gpu: NVIDIA H200}"]


def test_gpu_jobs_ask_slurm_for_one_gpu_and_the_others_for_none(tmp_path):
    result = snakemake(tmp_path, *PROFILE, "-n", *GPU_RUN)
    assert result.returncode == 0, result.stderr[-3000:]
    jobs = [job for job in planned_jobs(result.stdout + result.stderr) if job["rule"] != "all"]  # all: no job
    assert {job["rule"] for job in jobs} == {"tune", "build", "validate", "bench", "aggregate", "plot", "report"}
    reused = {job["wildcards"] for job in jobs if job["rule"] == "tune" and job["gpu"] == "0"}
    for job in jobs:
        on_gpu = job["rule"] in ("tune", "build", "validate", "bench") and "family=cpu" not in job["wildcards"]
        on_gpu = on_gpu and job["wildcards"] not in reused
        assert job["gpu"] == ("1" if on_gpu else "0"), job
        assert job["runtime"] == ("240" if job["rule"] == "tune" else "60") and job["mem_mb"] == "16000"
    # a tune job that reuses a committed result needs no GPU; the H200's committed results cover the CuPy rungs
    assert all("family=cupy" in w for w in reused) and len(reused) == 10


@pytest.mark.parametrize("config, named", [([], "device: auto"), (GPU_RUN[:2], "tune.gpu")])
def test_a_cluster_run_needs_what_each_node_would_decide_for_itself_in_the_config(tmp_path, config, named):
    # A partition that exists nowhere: should the check ever let jobs through, no cluster would take them.
    result = snakemake(tmp_path, *PROFILE, *config, "--default-resources", "slurm_partition=gemmbench-none",
                       timeout=120)
    assert result.returncode != 0
    assert named in result.stdout + result.stderr
    assert not (tmp_path / "results").exists(), "nothing may be submitted"

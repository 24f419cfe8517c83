"""The SLURM profile, planned here (.ci/slurm-test submits through it to a real SLURM)."""
import json
import subprocess
import sys

import pytest
from conftest import ROOT, SNAKEMAKE_ENV, planned_jobs, snakemake, tree_copy

from gemmbench import configuration
from gemmbench.tuning import records
from kernels import registry

PROFILE = ["--workflow-profile", str(ROOT / "workflow/profiles/slurm")]
GPU_RUN = ["--config", "device=cuda", "tune={gpu: NVIDIA H200}"]


def test_gpu_jobs_ask_slurm_for_one_gpu_and_the_others_for_none(tmp_path):
    """On a copy of the tree with committed results for the CuPy rungs on "Test GPU", keyed with this host's
    compilers (a cluster's nodes share the head's software): reusing one is a tune job without a GPU."""
    tree = tree_copy(tmp_path / "tree")
    cfg = configuration.validate({"device": "cuda"})
    rungs = [v for key, v in registry.load().items()
             if key.startswith("cupy/") and v.space and v.workload == "gemm" and "fp32" in v.modes]
    for variant in rungs:
        path = tree / records.committed_path("test-gpu", variant, "fp32").relative_to(ROOT)
        path.parent.mkdir(parents=True)
        settings = records.settings(cfg["tune"], variant)
        path.write_text(json.dumps({"key": records.key(variant, "fp32", settings), "settings": settings,
                                    "classes": {}}))
    command = [sys.executable, "-m", "snakemake", "-s", str(tree / "Snakefile"), "--directory", str(tmp_path),
               *PROFILE, "-n", "--config", "device=cuda", "tune={gpu: Test GPU}"]
    result = subprocess.run(command, capture_output=True, text=True, env={**SNAKEMAKE_ENV, "PYTHONPATH": str(tree)})
    assert result.returncode == 0, result.stderr[-3000:]
    jobs = [job for job in planned_jobs(result.stdout + result.stderr) if job["rule"] != "all"]  # all: no job
    # tune_compile: the searches' compiles (the variants without a committed result here), on a node with a GPU;
    # tune_trials and tune_check_compile: those of the variants compiled per shape (TVM's)
    assert {job["rule"] for job in jobs} == {"tune_compile", "tune_trials", "tune_check_compile", "tune", "tune_code",
                                           "build", "measure", "aggregate", "plot", "report"}
    reused = {job["wildcards"] for job in jobs if job["rule"] == "tune" and job["gpu"] == "0"}
    for job in jobs:
        on_gpu = job["rule"] in ("tune_compile", "tune_trials", "tune_check_compile", "tune", "build", "measure")
        on_gpu = on_gpu and "family=cpu" not in job["wildcards"] and job["wildcards"] not in reused
        assert job["gpu"] == ("1" if on_gpu else "0"), job
        searching = job["rule"] in ("tune", "tune_compile", "tune_trials")
        assert job["runtime"] == ("240" if searching else "60") and job["mem_mb"] == "16000"
    assert sorted(w.split("variant=")[1].split(",")[0] for w in reused) == sorted(v.name for v in rungs)
    for variant in rungs:  # the committed result is the tune job's input: committing another re-runs it
        assert f"resources/tuning/test-gpu/cupy/{variant.name}/fp32.json" in result.stdout + result.stderr


@pytest.mark.parametrize("config, named", [([], "device: auto"), (GPU_RUN[:2], "tune.gpu")])
def test_a_cluster_run_needs_what_each_node_would_decide_for_itself_in_the_config(tmp_path, config, named):
    # A partition that exists nowhere: should the check ever let jobs through, no cluster would take them.
    result = snakemake(tmp_path, *PROFILE, *config, "--default-resources", "slurm_partition=gemmbench-none",
                       timeout=120)
    assert result.returncode != 0
    assert named in result.stdout + result.stderr
    assert not (tmp_path / "results").exists(), "nothing may be submitted"

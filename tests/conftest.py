import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def gpu_available() -> bool:
    from gemmbench.plan import gpu_count
    return gpu_count() > 0


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU (skipped without one)")
    config.addinivalue_line("markers", "slow: over a minute on a 2-core machine (CI runs them; -m 'not slow' skips)")


def pytest_collection_modifyitems(config, items):
    if not gpu_available():
        skip = pytest.mark.skip(reason="no CUDA GPU visible")
        for item in items:
            if item.get_closest_marker("gpu"):
                item.add_marker(skip)


@pytest.fixture(autouse=True)
def no_adopted_worker_facts(monkeypatch):
    """A tune job takes its worker's toolchain and GPU for the rest of its process (records.adopt); a test is not one
    job, so each starts without those of the tests before it."""
    from gemmbench.tuning import records

    monkeypatch.setattr(records, "_reported", {})


def snakemake_command(workdir: Path) -> list[str]:
    """The repository's workflow, with its working directory (results/, reports/) in `workdir`."""
    return [sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "--directory", str(workdir)]


SNAKEMAKE_ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def tree_copy(path: Path) -> Path:
    """A copy of the repository's sources at `path` (no results, caches or environments), to edit freely."""
    shutil.copytree(ROOT, path, symlinks=True, ignore=shutil.ignore_patterns(
        ".git", ".venv", ".gpu-node", ".snakemake", "results", "reports", "__pycache__"))
    return path


def write_config(workdir: Path, config: dict) -> Path:
    path = workdir / "test-config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def snakemake(workdir: Path, *args, config: dict | None = None, timeout: float = 600):
    cmd = snakemake_command(workdir) + (["--configfile", str(write_config(workdir, config))] if config else [])
    return subprocess.run(cmd + list(args), capture_output=True, text=True, timeout=timeout, env=SNAKEMAKE_ENV)


@pytest.fixture
def cpu_config() -> dict:
    return yaml.safe_load((ROOT / "config" / "test.yaml").read_text())


def planned_jobs(output: str) -> list[dict]:
    """(rule, wildcards, resources, priority) of every job a dry run prints."""
    jobs = []
    for block in re.split(r"\n(?=(?:local)?rule \w+:)", output):
        rule = re.match(r"(?:local)?rule (\w+):", block)
        resources = re.search(r"resources: (.*)", block)
        if rule and resources:
            wildcards, priority = re.search(r"wildcards: (.*)", block), re.search(r"priority: (\d+)", block)
            jobs.append({"rule": rule.group(1), "wildcards": wildcards.group(1) if wildcards else "",
                         "priority": int(priority.group(1)) if priority else 0,
                         **dict(item.split("=", 1) for item in resources.group(1).split(", "))})
    return jobs

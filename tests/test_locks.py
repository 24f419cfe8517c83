"""Which processes keep a Snakemake directory lock alive (gemmbench/locks.py)."""
import pytest

from gemmbench import locks


@pytest.mark.parametrize("argv, running", [
    (["snakemake", "--cores", "all"], True),
    (["/venv/bin/python3", "/venv/bin/snakemake", "--cores", "all"], True),
    (["python3", "-u", "-m", "snakemake", "--cores", "all"], True),
    (["/venv/bin/python3.12", "/run/.snakemake/scripts/tmpab12.bench.py"], True),  # a job of a run
    (["bash", "-c", "cd /run && exec snakemake --cores all"], False),  # the shell that started a run
    (["python3", "-m", "gemmbench.worker", "/tmp/gemmbench-x/task.json", "0"], False),
    (["python3", "-c", "print('snakemake')"], False),
    ([], False),
])
def test_only_snakemake_and_its_jobs_hold_a_directory(argv, running):
    assert locks.runs_snakemake(argv) is running

"""Which processes keep a Snakemake directory lock alive (gemmbench/run/locks.py)."""
import os

import pytest

from gemmbench.run import locks


@pytest.mark.parametrize("argv, running", [
    (["snakemake", "--cores", "all"], True),
    (["/venv/bin/python3", "/venv/bin/snakemake", "--cores", "all"], True),
    (["python3", "-u", "-m", "snakemake", "--cores", "all"], True),
    (["/venv/bin/python3.12", "/run/.snakemake/scripts/tmpab12.bench.py"], True),  # a job of a run
    (["bash", "-c", "cd /run && exec snakemake --cores all"], False),  # the shell that started a run
    (["python3", "-m", "gemmbench.run.worker", "/tmp/gemmbench-x/task.json", "0"], False),
    (["python3", "-c", "print('snakemake')"], False),
    ([], False),
])
def test_only_snakemake_and_its_jobs_hold_a_directory(argv, running):
    assert locks.runs_snakemake(argv) is running


def test_another_users_snakemake_whose_directory_cannot_be_read_counts_as_holding_the_lock(tmp_path, monkeypatch):
    """Its working directory is unreadable (PermissionError), so it cannot be shown to work elsewhere: the lock
    stays; a process of ours in another directory does not count."""
    from gemmbench.run import locks

    for pid, cwd in ((4242, None), (4343, tmp_path / "elsewhere")):
        proc = tmp_path / "proc" / str(pid)
        proc.mkdir(parents=True)
        (proc / "cmdline").write_bytes(b"python\0-m\0snakemake\0--cores\0all\0")
        if cwd:
            cwd.mkdir()
            (proc / "cwd").symlink_to(cwd)
    real_readlink = os.readlink

    def readlink(path):
        if str(path).endswith("4242/cwd"):
            raise PermissionError(13, "Permission denied")
        return real_readlink(path)

    monkeypatch.setattr(os, "readlink", readlink)
    assert locks._snakemake_processes(tmp_path / "work", tmp_path / "proc") == [4242]

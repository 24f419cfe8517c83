"""Locks. A job holds the first free one of several lock files (a GPU, a resident worker's slot) for as long as it
runs: the kernel drops it when its holder exits, however it exits (first_free).

A run killed with kill -9 (or a lost SSH session) leaves Snakemake's directory lock behind, and the next run
stops with a LockException. This module lets the same command simply continue where it can prove that the lock
is stale: its owner (recorded when a run starts) was on this host and is gone, and no other Snakemake process on
this host works in the directory. Otherwise it says, in one line, who holds the lock and how to continue.
"""
from __future__ import annotations

import fcntl
import json
import logging
import os
import shlex
import shutil
import socket
from pathlib import Path

log = logging.getLogger("gemmbench")

def open_lock(path: Path, mode: int = 0o644) -> int:
    # Read-only is enough for flock; open before create, because Linux refuses O_CREAT on another user's file in
    # a sticky directory such as /tmp.
    try:
        return os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return os.open(path, os.O_RDONLY | os.O_CREAT, mode)


def first_free(paths, mode: int = 0o644) -> tuple[int, int] | None:
    """The index of the first of `paths` whose lock this process takes (exclusive, without waiting) and the lock's
    descriptor (closing it lets go); None where every one is held."""
    for i, path in enumerate(paths):
        while True:
            fd = open_lock(path, mode)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                break
            if _still_there(fd, path):
                return i, fd
            os.close(fd)  # its holder removed it as we took it (remove_if_free): the path's new file, then
    return None


def _still_there(fd: int, path: Path) -> bool:
    try:
        return os.fstat(fd).st_ino == os.stat(path).st_ino
    except FileNotFoundError:
        return False


def remove_if_free(path: Path) -> None:
    """Remove a lock file no process holds (taken, then removed while held, so that a process that opened it
    meanwhile finds it gone and takes the path's new file: first_free)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if _still_there(fd, path):
            path.unlink()
    except BlockingIOError:  # a job holds it: it stays
        pass
    finally:
        os.close(fd)


OWNER = Path(".snakemake") / "gemmbench-owner.json"
LOCKS = Path(".snakemake") / "locks"


def record_owner(workdir: Path, argv: list[str]) -> None:
    """Called once a run holds the lock: who holds it, so that a later run can tell a live owner from a dead one."""
    path = workdir / OWNER
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "argv": argv}))


def _ancestors() -> set[int]:
    pids, pid = set(), os.getpid()
    while pid > 1:
        pids.add(pid)
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return pids


def runs_snakemake(argv: list[str]) -> bool:
    """Whether a command line is Snakemake (`snakemake ...`, `python -m snakemake`, `python .../bin/snakemake`) or
    one of its script jobs (`python .../.snakemake/scripts/...`); not a shell that merely mentions it, such as the
    `bash -c "cd run && snakemake ..."` that started the run."""
    if not argv:
        return False
    if os.path.basename(argv[0]).startswith("snakemake"):
        return True
    if not os.path.basename(argv[0]).startswith("python"):
        return False
    args = [a for a in argv[1:] if not a.startswith("-") or a == "-m"]
    if args[:2] == ["-m", "snakemake"]:
        return True
    return bool(args) and (os.path.basename(args[0]).startswith("snakemake") or "/.snakemake/scripts/" in args[0])


def _snakemake_processes(workdir: Path, proc_root: Path = Path("/proc")) -> list[int]:
    """Other processes on this host running Snakemake (or one of its jobs) in `workdir`, or that may: one whose
    working directory cannot be read (another user's) counts, since it cannot be shown to work elsewhere."""
    mine, found = _ancestors(), []
    for proc in proc_root.glob("[0-9]*"):
        try:
            argv = (proc / "cmdline").read_bytes().decode(errors="replace").split("\0")
            if int(proc.name) in mine or not runs_snakemake([a for a in argv if a]):
                continue
        except (OSError, ValueError):  # gone meanwhile
            continue
        try:
            cwd = Path(os.readlink(proc / "cwd")).resolve()
        except PermissionError:  # another user's Snakemake: it may hold this lock
            found.append(int(proc.name))
            continue
        except OSError:  # gone meanwhile
            continue
        if cwd == workdir.resolve():
            found.append(int(proc.name))
    return found


def continue_command(argv: list[str]) -> str:
    rest = shlex.join(argv[1:])
    return f"snakemake --unlock {rest} && snakemake {rest}".replace("  ", " ")


def release_if_stale(workdir: Path, argv: list[str]) -> bool:
    """Remove the directory lock if no run can hold it any more; True if it did. Without /proc (not Linux) nothing
    can be proven and the lock stays."""
    locks = workdir / LOCKS
    if not locks.is_dir() or not any(locks.glob("*.lock")) or not Path("/proc/self").exists():
        return False
    owner = json.loads((workdir / OWNER).read_text()) if (workdir / OWNER).exists() else {}
    here = socket.gethostname()
    if owner.get("host", here) != here:
        log.error("this directory is locked by a run on %s (pid %s); if that run is no longer running, continue "
                  "with: %s", owner["host"], owner.get("pid"), continue_command(argv))
        return False
    alive = _snakemake_processes(workdir)
    if alive:
        log.error("this directory is locked by a Snakemake run still active here, or one whose directory cannot be "
                  "read (pid %s); wait for it, or stop it and run the same command again (%s)",
                  ", ".join(map(str, alive)), continue_command(argv))
        return False
    shutil.rmtree(locks)
    log.warning("a previous run here was stopped without cleaning up (pid %s): its lock is removed and this run "
                "continues it (finished results are kept, unfinished jobs run again)", owner.get("pid", "unknown"))
    return True

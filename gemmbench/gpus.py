"""One GPU per job on a box with several: Snakemake's `--resources gpu=N` bounds how many GPU jobs run at once,
and this decides which GPU each one gets. A job holds a lock file per GPU while its workers run, and they see only
that GPU (CUDA_VISIBLE_DEVICES set to its UUID before any CUDA call). Where CUDA_VISIBLE_DEVICES is already set
(SLURM sets it to a job's allocated GPU; a user may set it) it is respected and nothing is locked.
"""
from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import tempfile
import time
from pathlib import Path

log = logging.getLogger("gemmbench")

# Per box, not per checkout: two runs (or two users) on one box must not share a GPU either.
LOCK_DIR = Path(tempfile.gettempdir())


def uuids() -> list[str]:
    """This box's GPUs (NVML order); none without a driver."""
    try:
        import pynvml
        pynvml.nvmlInit()
    except Exception:  # no NVML library or no driver: no GPU to hand out
        return []
    try:
        return [pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(i))
                for i in range(pynvml.nvmlDeviceGetCount())]
    finally:
        pynvml.nvmlShutdown()


def _open_lock(path: Path) -> int:
    # Read-only is enough for flock; open before create, because Linux refuses O_CREAT on another user's file in
    # a sticky directory such as /tmp.
    try:
        return os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return os.open(path, os.O_RDONLY | os.O_CREAT, 0o644)


@contextlib.contextmanager
def claim(devices: list[str], lock_dir: Path | None = None, poll_s: float = 0.5):
    """Hold the first free device of `devices` for the duration of the block, waiting while all are taken.
    The kernel drops the lock when its holder exits, however it exits, so no stale lock outlives a killed job."""
    waiting = False
    while True:
        for device in devices:
            fd = _open_lock((lock_dir or LOCK_DIR) / f"gemmbench-{device}.lock")
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            try:
                yield device
            finally:
                os.close(fd)
            return
        if not waiting:
            log.info("all %d GPUs are taken by other jobs: waiting for one", len(devices))
            waiting = True
        time.sleep(poll_s)


@contextlib.contextmanager
def pinned(device: str):
    """Environment for the workers of a job on `device`: for a CUDA job, one GPU of its own while the block runs."""
    if device != "cuda" or "CUDA_VISIBLE_DEVICES" in os.environ:
        yield {}
        return
    found = uuids()
    if not found:  # no NVML: leave CUDA to fail or succeed on its own, and say so
        log.warning("NVML lists no GPU: the job is not pinned to one")
        yield {}
        return
    with claim(found) as uuid:
        log.info("running on GPU %s", uuid)
        yield {"CUDA_VISIBLE_DEVICES": uuid}

"""One GPU per job on a box with several: Snakemake's `--resources gpu=N` bounds how many GPU jobs run at once,
and this decides which GPU each one gets. A job holds a lock file per GPU while its workers run, and they see only
that GPU (CUDA_VISIBLE_DEVICES set to its UUID before any CUDA call). A CUDA_VISIBLE_DEVICES that is already set
is respected: one GPU (SLURM's allocation, or the user's choice) is used as it is, several are handed out.
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
def pinned(device: str, exclusive: bool = True):
    """Environment for the workers of a job on `device`: for a CUDA job, one GPU of its own while the block runs.
    A job that launches nothing on it (a build: compiling, loading modules, reading their facts) takes the first
    GPU without excluding anyone (exclusive=False)."""
    if device != "cuda":
        yield {}
        return
    given = os.environ.get("CUDA_VISIBLE_DEVICES")
    found = uuids() if given is None else [d for d in given.split(",") if d]
    if given is None and not found:  # no NVML: CUDA is left to find a GPU or fail on its own
        log.warning("NVML lists no GPU: the job is not pinned to one")
    if not found or (given is not None and len(found) == 1):  # nothing to choose from, or a GPU chosen already
        yield {}
        return
    if not exclusive:
        yield {"CUDA_VISIBLE_DEVICES": found[0]}
        return
    with claim(found) as gpu:
        log.info("running on GPU %s", gpu)
        yield {"CUDA_VISIBLE_DEVICES": gpu}

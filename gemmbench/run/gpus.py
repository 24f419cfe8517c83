"""One job per GPU at a time, whoever starts it: Snakemake's `--resources gpu=N` bounds how many GPU jobs a run
starts at once, and this decides which GPU each one gets. A job holds a lock file named by the GPU's UUID, in one
place per box (LOCK_DIR, whatever TMPDIR says), while its workers run, and they see only that GPU
(CUDA_VISIBLE_DEVICES set to its UUID before any CUDA call): two runs, or two users, on one box never share a GPU.
A CUDA_VISIBLE_DEVICES that is already set is respected: its GPUs (SLURM's allocation, or the user's choice, given
as indices or UUIDs) are handed out among the jobs, one GPU included, each locked by its UUID.
"""
from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import time
from pathlib import Path

from gemmbench.run import locks

log = logging.getLogger("gemmbench")

# Per box, not per checkout or per TMPDIR: two runs (or two users) on one box must find the same locks.
LOCK_DIR = Path("/tmp/gemmbench-gpu-locks")
HELD: set[str] = set()  # the lock names of the GPUs this process holds (claim), while it holds them


def _lock_dir(lock_dir: Path | None) -> Path:
    path = lock_dir or LOCK_DIR
    if not path.is_dir():
        path.mkdir(parents=True, exist_ok=True)
        try:
            os.chmod(path, 0o1777)  # every user's jobs create their locks here (sticky, as /tmp)
        except PermissionError:  # made by another user meanwhile
            pass
    return path


def lock_names(given: list[str], known: list[str]) -> list[str]:
    """The UUID of each entry of a CUDA_VISIBLE_DEVICES list: an index into this box's GPUs (NVML's order, which is
    CUDA's for GPUs of one model, sorted by PCI bus), a UUID, or a UUID's prefix (as CUDA accepts it). An entry that
    matches nothing keeps its own name."""
    names = []
    for entry in given:
        if entry.isdigit() and int(entry) < len(known):
            names.append(known[int(entry)])
        else:
            names.append(next((u for u in known if u.startswith(entry)), entry) if entry else entry)
    return names


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


def lock_name(device: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in device)


@contextlib.contextmanager
def claim(devices: list[str], lock_dir: Path | None = None, poll_s: float = 0.5, names: list[str] | None = None):
    """Hold the first free device of `devices` (locked by `names`, their UUIDs; by the devices themselves without)
    for the duration of the block, waiting while all are taken. The kernel drops the lock when its holder exits,
    however it exits, so no stale lock outlives a killed job."""
    waiting = False
    while True:
        held = locks.first_free(_lock_dir(lock_dir) / f"{lock_name(name)}.lock" for name in names or devices)
        if held:
            name = (names or devices)[held[0]]
            HELD.add(name)
            try:
                yield devices[held[0]]
            finally:
                HELD.discard(name)
                os.close(held[1])
            return
        if not waiting:
            log.info("all %d GPUs are taken by other jobs: waiting for one", len(devices))
            waiting = True
        time.sleep(poll_s)


@contextlib.contextmanager
def environment(env: dict):
    """os.environ with `env` set while the block runs, for the worker processes a library starts on its own (TVM's
    search), and as it was after it."""
    saved = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextlib.contextmanager
def pinned(device: str, exclusive: bool = True):
    """Environment for the workers of a job on `device`: for a CUDA job, one GPU of its own while the block runs.
    A job that launches nothing on it (a build: compiling, loading modules, reading their facts) takes the first
    GPU without excluding anyone (exclusive=False)."""
    if device != "cuda":
        yield {}
        return
    given = os.environ.get("CUDA_VISIBLE_DEVICES")
    known = uuids()
    found = known if given is None else [d for d in given.split(",") if d]
    if not found:  # no NVML, or no GPU given: CUDA is left to find a GPU or fail on its own
        log.warning("NVML lists no GPU: the job is not pinned to one")
        yield {}
        return
    names = lock_names(found, known)
    if not exclusive or (given is not None and len(found) == 1 and names[0] in HELD):
        # a build shares the first GPU; the tasks of a block that holds this process's GPU and set it for its workers
        # (a search of a variant's own, whose rounds run tasks) run there: claiming it again would wait for itself
        yield {"CUDA_VISIBLE_DEVICES": found[0]}
        return
    with claim(found, names=names) as gpu:
        log.info("running on GPU %s", gpu)
        yield {"CUDA_VISIBLE_DEVICES": gpu}


QUIET_WAIT_S = 120.0  # the longest a process waits for its GPU's quiet lock before it goes on without it
QUIET_POLL_S = 0.005


def _take(fd: int, operation: int, since: float) -> float | None:
    """Seconds from `since` until the flock `operation` was taken, or None once QUIET_WAIT_S has passed."""
    while True:
        try:
            fcntl.flock(fd, operation | fcntl.LOCK_NB)
            return time.perf_counter() - since
        except BlockingIOError:
            if time.perf_counter() - since > QUIET_WAIT_S:
                return None
            time.sleep(QUIET_POLL_S)


@contextlib.contextmanager
def quiet(exclusive: bool, lock_dir: Path | None = None):
    """The GPU this process is pinned to kept free of CUDA contexts being made or destroyed while the block runs:
    another process's context coming or going stalls the kernels running on that GPU for up to milliseconds (a
    build beside the job that measures starts a worker, and with it a context, for every compile), where loading
    modules into a context that exists, NVML's reads and a busy host do not
    (reports/examples/h100-slow-samples/slow-samples-diagnosis.jsonl). A timed stretch holds the lock exclusively; a
    worker holds it shared while it makes or destroys its context. Yields the seconds waited, or None where the
    lock was not taken: not pinned to one GPU, or still held by others after QUIET_WAIT_S (the block runs
    anyway).

    A turnstile (a second lock) keeps a stream of contexts from starving the timing: a timed stretch takes it while
    it waits, and a context passes through it before it takes its shared hold, so contexts that come after a timed
    stretch began to wait go after it, and those that came before go first."""
    device = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    if not device or "," in device:
        yield None
        return
    directory = _lock_dir(lock_dir)
    fd = locks.open_lock(directory / f"{lock_name(device)}.quiet", 0o666)
    turnstile = locks.open_lock(directory / f"{lock_name(device)}.quiet-turnstile", 0o666)
    try:
        start, operation = time.perf_counter(), fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
        waited = _take(turnstile, operation, start)
        if waited is not None:
            waited = _take(fd, operation, start)
        fcntl.flock(turnstile, fcntl.LOCK_UN)
        yield waited
    finally:
        os.close(turnstile)
        os.close(fd)

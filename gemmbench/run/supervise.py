"""Watchdog around the worker: a hanging or crashing point becomes a status row, and the rest still run."""
from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import io
import itertools
import json
import logging
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from gemmbench import ROOT, path_with
from gemmbench.run import gpus, locks
from gemmbench.run.task import Point, Task

log = logging.getLogger("gemmbench")

LAUNCH_FREE = ("build", "compile")  # task kinds that compile and load kernels but launch none


def artifact_caches(cache_dir: str) -> dict:
    """Where the libraries that compile kernels keep what they compiled, so that every job and process of a run
    (and the next run) reuses it: CuPy's NVRTC cubins and Numba's CUDA kernels, each keyed by the library on
    source, options, compiler and architecture. (TVM's generated source goes to cache_dir/tvm, by the family.)"""
    return {"CUPY_CACHE_DIR": str(Path(cache_dir) / "cupy"), "NUMBA_CACHE_DIR": str(Path(cache_dir) / "numba")}


def _read_events(stream, events: queue.Queue) -> None:
    try:
        for line in stream:
            try:
                events.put(json.loads(line))
            except json.JSONDecodeError:
                log.warning("worker: %s", line.rstrip())
    except OSError:  # a resident worker's connection reset: it died
        pass
    events.put(None)  # end of stream: the worker exited


def oom_kills() -> int | None:
    """How many processes the kernel's OOM killer has killed in this process's cgroup (v2), or None if unknown."""
    try:
        group = Path("/proc/self/cgroup").read_text().split("::", 1)[1].strip()
        events = (Path("/sys/fs/cgroup") / group.lstrip("/") / "memory.events").read_text()
    except (OSError, IndexError):
        return None
    found = re.search(r"^oom_kill (\d+)", events, re.MULTILINE)
    return int(found.group(1)) if found else None


def exit_failure(code: int | None, oom_killed: bool, stderr: str) -> dict:
    """The row of points lost when the worker exited without reporting them (`code`: its exit status; None for a
    resident worker that an earlier job started, whose status only that job's process could learn)."""
    if code in (-signal.SIGKILL, None) and oom_killed:
        return {"status": "oom", "message": "worker killed by the kernel's OOM killer (the cgroup's oom_kill count "
                                            f"rose meanwhile): {stderr}"}
    if code is None:
        fatal = re.search(r"Fatal Python error: ([A-Za-z -]+)", stderr)  # faulthandler's first line names the signal
        how = f"killed by a signal: {fatal.group(1).strip()}, as its log says" if fatal else \
            "an earlier job started it, so its exit status is not known here"
        return {"status": "error", "message": f"resident worker exited ({how}): {stderr}"}
    how = f"killed by signal {-code}" if code < 0 else "crash"
    return {"status": "error", "message": f"worker exited with code {code} ({how}): {stderr}"}


def _stderr_tail(path: Path, start: int = 0, limit: int = 1500) -> str:
    """The end of a worker's stderr log, from byte `start` (where the current task's part begins), after the line
    that says why Python died where the end leaves it out (faulthandler's list of modules can fill the end)."""
    with open(path, errors="replace") as text:
        text.seek(start)
        part = text.read().strip()
    fatal = re.search(r"^Fatal Python error: .*$", part, re.MULTILINE)
    tail = part[-limit:]
    return f"{fatal.group(0)} ... {tail}" if fatal and fatal.start() < len(part) - len(tail) else tail


def _worker(*args: str, wrap=(), **popen) -> subprocess.Popen:
    return subprocess.Popen([*wrap, sys.executable, "-m", "gemmbench.run.worker", *args], start_new_session=True,
                            **popen)


class Fresh:
    """A worker process for this one task, started for it and gone with it."""

    def __init__(self, env: dict, tmp: Path, wrap=()):
        self.env, self.stderr_path, self.wrap = env, tmp / "stderr.log", list(wrap)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def start(self, task_path: Path, start: int, done_path: Path):
        with open(self.stderr_path, "w") as stderr:
            self.proc = _worker(str(task_path), str(start), str(done_path), wrap=self.wrap, stdout=subprocess.PIPE,
                                stderr=stderr, text=True, env=self.env)
        self.pid = self.proc.pid
        return self.proc.stdout

    def kill(self) -> None:
        os.killpg(self.pid, signal.SIGKILL)
        self.proc.wait()

    def exit_code(self) -> int | None:
        return self.proc.wait()

    def stderr(self) -> str:
        return _stderr_tail(self.stderr_path)


RESIDENT_DIR = Path(tempfile.gettempdir()) / f"gemmbench-workers-{os.getuid()}"
# The builds' workers run this much nicer than the workers that time: compiles that took every core beside a search
# slowed its host work (launches, accounting) where spinning processes at this niceness hardly did
# (reports/examples/h200-first-run, session26/contention.txt).
BUILDS_NICENESS = 10
RESIDENT_IDLE_S = 30.0  # a resident worker outlives its job by this long, for the run's next GPU job
RESIDENT_SLOT_POLL_S = 0.05  # how often a job looks for a free slot of the builds' pool


class Resident:
    """The resident worker of this job's environment (interpreter, checkout, GPU, caches, settings): started by the
    first job that needs it, reused by the jobs after it, so that a job costs neither a process start nor imports nor
    a CUDA context. Jobs that could run side by side (on the CPU, or on one GPU under two runs) each take a slot of
    their own, the first whose lock is free; on a GPU its lock already makes the jobs take turns."""

    ATTEMPTS = 3  # workers started for one task before its points are lost with the last one's log

    def __init__(self, env: dict, timeout_s: float, pool: str = ""):
        """`pool`: "" for the jobs that time on the GPU, a name for another pool of workers (the builds')."""
        self.env, self.timeout_s, self.proc, self.offset, self.pool = env, timeout_s, None, 0, pool
        wanted = [sys.executable, str(ROOT), sorted(env.items()), pool]
        self.key = hashlib.sha256(json.dumps(wanted).encode()).hexdigest()[:16]

    def __enter__(self):
        RESIDENT_DIR.mkdir(mode=0o700, exist_ok=True)
        # The builds' pool has a slot per core: every worker makes a CUDA context (a stall for the job timing beside
        # it), and jobs that each fan their compiles out over the cores would otherwise start several per core.
        slots = range(compile_workers()) if self.pool else itertools.count()
        while (taken := locks.first_free((RESIDENT_DIR / f"{self.key}-{slot}.lock" for slot in slots), 0o600)) is None:
            time.sleep(RESIDENT_SLOT_POLL_S)
        slot, self.lock = taken
        name = RESIDENT_DIR / f"{self.key}-{slot}"
        self.address, self.log = str(name) + ".sock", Path(str(name) + ".log")
        return self

    def __exit__(self, *exc):
        os.close(self.lock)  # the worker stays, idle, for the next job
        # none stays (it removed its socket on its way out, exited, or was killed): nor does its slot
        if not Path(self.address).exists() or not _alive(getattr(self, "pid", None)):
            Path(self.address).unlink(missing_ok=True)
            self.log.unlink(missing_ok=True)
            locks.remove_if_free(RESIDENT_DIR / f"{Path(self.address).stem}.lock")
        return False

    def _connect(self) -> socket.socket | None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(self.address)
            return sock
        except OSError:
            sock.close()
            return None

    def _launch(self) -> socket.socket | None:
        self.offset = 0
        with open(self.log, "w") as stderr:
            self.proc = _worker("--serve", self.address, str(RESIDENT_IDLE_S),
                                str(BUILDS_NICENESS if self.pool else 0), stdout=subprocess.DEVNULL, stderr=stderr,
                                env=self.env)
        deadline = time.monotonic() + self.timeout_s
        while self.proc.poll() is None and time.monotonic() < deadline:
            sock = self._connect()
            if sock:
                return sock
            time.sleep(0.02)
        return None

    def start(self, task_path: Path, start: int, done_path: Path):
        """The events of the task from `start` on: from the resident worker, or from a fresh one where there is none,
        or where the one there found its sources changed."""
        request = json.dumps({"task": str(task_path), "start": start, "done": str(done_path)}) + "\n"
        launched, sock = False, self._connect()
        for _ in range(self.ATTEMPTS):
            if sock is None:
                sock, launched = self._launch(), True
                if sock is None:  # it died, or hung, before listening: its log says why
                    break
            self.offset = self.log.stat().st_size if self.log.exists() else 0
            try:
                sock.sendall(request.encode())
                stream = sock.makefile("r")
                hello = json.loads(stream.readline() or '{"event": "gone"}')
            except OSError:  # it was on its way out (a fatal task's end, a kill) when this job connected
                hello = {"event": "gone"}
            if hello["event"] == "hello":
                self.pid = hello["pid"]
                log.info("worker%s: %s (pid %d)", f" ({self.pool})" if self.pool else "",
                         "started" if launched else "resident, reused", self.pid)
                return stream
            sock.close()
            _wait_gone(hello.get("pid"))
            sock = None  # stale sources, or gone: a fresh one
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.pid = self.proc.pid if self.proc is not None else None
        return io.StringIO("")

    def _started_here(self) -> bool:
        return self.proc is not None and self.proc.pid == self.pid

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, signal.SIGKILL)
        self.exit_code()

    def exit_code(self) -> int | None:
        """Its exit status where this job started it; None where an earlier job did (only its parent learns it)."""
        if self._started_here():
            return self.proc.wait()
        _wait_gone(self.pid)
        return None

    def stderr(self) -> str:
        return _stderr_tail(self.log, self.offset)


def _alive(pid: int | None) -> bool:
    """Whether process `pid` runs (neither gone nor exited and unreaped)."""
    try:
        return bool(pid) and Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return False


def _wait_gone(pid: int | None, limit_s: float = 10.0) -> None:
    deadline = time.monotonic() + limit_s
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)


# Kinds whose tasks go to a resident worker: those that time, one pool; those that launch nothing, another. A build
# or compile in a fresh process would make a CUDA context and destroy it, each time stalling (gpus.quiet) the
# timings beside it: resident, a builds' worker makes one context for the run's builds it serves.
RESIDENT_KINDS = ("measure", "tune", *LAUNCH_FREE)


def run_task(task: Task, timeout_s: float, describe=lambda i: str(i),
             on_row=lambda i, row, device: None, log_rows: bool = True) -> tuple[list[dict], dict | None]:
    """One row per point of `task`, in order, and the facts of the device the worker ran on (measure, profile and
    tune tasks; None if no worker got that far; a task of no points asks for these alone, `device_facts`). Each point
    (and the build) gets `timeout_s` before it is killed. `on_row(i, row, device)` is called as each row arrives, so a
    caller can keep it before the next one runs; `log_rows=False` logs only the rows that are not ok."""
    count = len(task.points)
    rows: dict[int, dict] = {}
    device = None
    # A build (or a compile ahead of tuning) launches nothing, so it shares the GPU with the job that is measuring
    # (see workflow/rules/build.smk).
    with gpus.pinned(task.device, exclusive=task.kind not in LAUNCH_FREE) as pin, \
            tempfile.TemporaryDirectory(prefix="gemmbench-") as tmp:
        env = {**os.environ, **pin, **artifact_caches(task.cache_dir), "PYTHONPATH": path_with(ROOT)}
        task_path, done_path = Path(tmp) / "task.json", Path(tmp) / "done.json"
        task.save(task_path)
        start = 0
        worker = Resident(env, timeout_s, "builds" if task.kind in LAUNCH_FREE else "") \
            if task.kind in RESIDENT_KINDS and not task.wrap else Fresh(env, Path(tmp), task.wrap)
        with worker:
            asked = False
            while start < count or not asked:  # a task of no points asks only for its device's facts
                asked = True
                kills_before = oom_kills()
                done_path.write_text(json.dumps(rows))  # a worker started after a failure sees the rows before it
                events: queue.Queue = queue.Queue()
                threading.Thread(target=_read_events, args=(worker.start(task_path, start, done_path), events),
                                 daemon=True).start()
                current, ready, deadline = None, False, time.monotonic() + timeout_s
                while True:
                    try:
                        event = events.get(timeout=max(0.0, deadline - time.monotonic()))
                    except queue.Empty:
                        worker.kill()
                        stage = f"point {describe(current)}" if ready else "build"
                        failed = {"status": "timeout",
                                  "message": f"{stage} still running after {timeout_s:g} s: killed"}
                        break
                    if event is None or event["event"] == "end":
                        code = event["code"] if event else worker.exit_code()
                        kills = oom_kills()
                        failed = exit_failure(code, None not in (kills, kills_before) and kills > kills_before,
                                              worker.stderr())
                        break
                    deadline = time.monotonic() + timeout_s
                    if event["event"] == "ready":
                        ready, device = True, event.get("device") or device
                    elif event["event"] == "start":
                        current = event["index"]
                    elif event["event"] == "row":
                        rows[event["index"]] = event["row"]
                        on_row(event["index"], event["row"], device)
                        if log_rows or event["row"]["status"] != "ok":
                            log.info("[%d/%d] %s: %s (%s)", len(rows), count, describe(event["index"]),
                                     event["row"]["status"], event["row"]["message"][:200])
                # A failure before any point started (build, import) hits every remaining point, one during a point
                # hits that point; a worker that reported its own failure and exited is simply restarted after it.
                lost = [i for i in range(start, count) if i not in rows]
                for i in (lost if current is None else [current] if current in lost else []):
                    rows[i] = dict(failed)
                    on_row(i, rows[i], device)
                    log.warning("[%d/%d] %s: %s (%s)", len(rows), count, describe(i), failed["status"],
                                failed["message"][:300])
                start = max(rows) + 1 if rows else count
    return [rows[i] for i in range(count)], device


def device_facts(task: Task, timeout_s: float) -> dict | None:
    """The facts of the device (its toolchain among them, `versions`) as the worker that would run `task`'s points
    reports them: the resident one where there is one, which then has them at hand. None where none reported them."""
    return run_task(dataclasses.replace(task, points=[]), timeout_s)[1]


COMPILE_WORKERS = 16  # at most: compiling is CPU work (TVM's codegen, NVRTC, Numba), one process per core


def compile_workers() -> int:
    return min(COMPILE_WORKERS, os.cpu_count() or 1)


def compile_ahead(config: dict, variant, mode: str, points: list[Point],
                  classes: dict | None = None) -> tuple[int, list[dict | None]]:
    """The points' kernels compiled into the shared caches by up to COMPILE_WORKERS parallel workers (they launch
    nothing), where there is more than one core and one point: the number of workers and each point's compile row
    (None where none ran). A compile that fails otherwise than by the variant's refusal (`rejected`) is seen again,
    and reported, by whoever runs the point."""
    workers = min(compile_workers(), len(points))
    rows = [None] * len(points)
    if workers > 1:
        chunks = [list(range(len(points)))[i::workers] for i in range(workers)]
        with ThreadPoolExecutor(workers) as pool:
            def compile_chunk(chunk: list[int]) -> list[dict]:
                task = Task.of("compile", config, variant, mode, [points[i] for i in chunk], classes)
                return run_task(task, config["timing"]["point_timeout_s"], log_rows=False)[0]

            for chunk, chunk_rows in zip(chunks, pool.map(compile_chunk, chunks)):
                for i, row in zip(chunk, chunk_rows):
                    rows[i] = row
    return workers, rows

"""Watchdog around the worker: a hanging or crashing point becomes a status row, and the rest still run."""
from __future__ import annotations

import json
import logging
import os
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from gemmbench import ROOT, path_with
from gemmbench.run import gpus
from gemmbench.run.task import Task

log = logging.getLogger("gemmbench")

LAUNCH_FREE = ("build", "compile")  # task kinds that compile and load kernels but launch none


def artifact_caches(cache_dir: str) -> dict:
    """Where the libraries that compile kernels keep what they compiled, so that every job and process of a run
    (and the next run) reuses it: CuPy's NVRTC cubins and Numba's CUDA kernels, each keyed by the library on
    source, options, compiler and architecture. (TVM's generated source goes to cache_dir/tvm, by the family.)"""
    return {"CUPY_CACHE_DIR": str(Path(cache_dir) / "cupy"), "NUMBA_CACHE_DIR": str(Path(cache_dir) / "numba")}


def _read_events(stream, events: queue.Queue) -> None:
    for line in stream:
        try:
            events.put(json.loads(line))
        except json.JSONDecodeError:
            log.warning("worker: %s", line.rstrip())
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


def exit_failure(code: int, oom_killed: bool, stderr: str) -> dict:
    """The row of points lost when the worker exited without reporting them."""
    if code == -signal.SIGKILL and oom_killed:
        return {"status": "oom", "message": "worker killed by the kernel's OOM killer (the cgroup's oom_kill count "
                                            f"rose meanwhile): {stderr}"}
    how = f"killed by signal {-code}" if code < 0 else "crash"
    return {"status": "error", "message": f"worker exited with code {code} ({how}): {stderr}"}


def _stderr_tail(path: Path, limit: int = 1500) -> str:
    text = path.read_text(errors="replace").strip()
    return text[-limit:]


def run_task(task: Task, timeout_s: float, describe=lambda i: str(i),
             on_row=lambda i, row, device: None, log_rows: bool = True) -> tuple[list[dict], dict | None]:
    """One row per point of `task`, in order, and the facts of the device the worker ran on (validate and bench
    tasks; None if no worker got that far). Each point (and the build) gets `timeout_s` before it is killed.
    `on_row(i, row, device)` is called as each row arrives, so a caller can keep it before the next one runs;
    `log_rows=False` logs only the rows that are not ok."""
    count = len(task.points)
    rows: dict[int, dict] = {}
    device = None
    # A build (or a compile ahead of tuning) launches nothing, so it shares the GPU with the job that is measuring
    # (see workflow/rules/build.smk).
    with gpus.pinned(task.device, exclusive=task.kind not in LAUNCH_FREE) as pin, \
            tempfile.TemporaryDirectory(prefix="gemmbench-") as tmp:
        env = {**os.environ, **pin, **artifact_caches(task.cache_dir), "PYTHONPATH": path_with(ROOT)}
        task_path, stderr_path, done_path = Path(tmp) / "task.json", Path(tmp) / "stderr.log", Path(tmp) / "done.json"
        task.save(task_path)
        start = 0
        while start < count:
            kills_before = oom_kills()
            done_path.write_text(json.dumps(rows))  # a worker started after a failure sees the rows before it
            with open(stderr_path, "w") as stderr:
                proc = subprocess.Popen([sys.executable, "-m", "gemmbench.run.worker", str(task_path), str(start),
                                         str(done_path)],
                                        stdout=subprocess.PIPE, stderr=stderr, text=True, env=env,
                                        start_new_session=True)
            events: queue.Queue = queue.Queue()
            threading.Thread(target=_read_events, args=(proc.stdout, events), daemon=True).start()
            current, ready, deadline = None, False, time.monotonic() + timeout_s
            while True:
                try:
                    event = events.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                    stage = f"point {describe(current)}" if ready else "build"
                    failed = {"status": "timeout", "message": f"{stage} still running after {timeout_s:g} s: killed"}
                    break
                if event is None:
                    code, kills = proc.wait(), oom_kills()
                    failed = exit_failure(code, None not in (kills, kills_before) and kills > kills_before,
                                          _stderr_tail(stderr_path))
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

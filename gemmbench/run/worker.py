"""Runs tasks' points in a child process, either one task (`python -m gemmbench.run.worker TASK.json START
DONE.json`; DONE: the rows of the points before START, from an earlier worker of the same task) or, resident, every
task that jobs send it on a Unix socket (`python -m gemmbench.run.worker --serve SOCKET IDLE_S NICENESS`) until it has
been idle IDLE_S seconds: the jobs of a run then share one import, one CUDA context and the fp64 references.

It speaks a line protocol on its channel (the original stdout, or the connection; prints from kernels go to stderr):
{"event": "ready", "device": {...}} after the build (the facts of the device it runs on; null for compile tasks),
{"event": "start", "index": i}, {"event": "row", "index": i, "row": {...}}; resident, also {"event": "hello",
"pid": ...} first and {"event": "end", "code": ...} last, or {"event": "stale"} where the sources it imported have
changed since (it exits, and the job starts a fresh one).
After a failure on a GPU it exits, because the CUDA context may be unusable; the supervisor starts a fresh one.
"""
from __future__ import annotations

import contextlib
import faulthandler
import json
import os
import socket
import sys
import traceback
from pathlib import Path

from gemmbench import ROOT
from gemmbench.measure import devices, guard
from gemmbench.run import gpus, locks, rows
from gemmbench.run.operands import REFERENCES, References
from gemmbench.run.task import Task
from kernels import registry

FATAL_EXIT = 3


def _sender(channel):
    # NumPy scalars (np.bool_, np.float32) from kernels and statistics become plain JSON values.
    plain = lambda value: value.item() if hasattr(value, "item") else str(value)  # noqa: E731

    def send(**msg):
        channel.write(json.dumps(msg, default=plain) + "\n")
        channel.flush()
    return send


def _channel():
    channel = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # anything printed by kernels or libraries goes to stderr, not into the protocol
    sys.stdout = sys.stderr
    return _sender(channel)


_backends: dict = {}

HARNESS_THREADS: set = set()  # native threads the harness itself started (a device's runtime, a BLAS pool)


def _create(device: str) -> devices.Backend:
    if device == "cuda":
        from gemmbench.measure.cuda_device import CudaBackend  # CuPy only where a GPU runs

        return CudaBackend()
    return devices.Backend()


def _backend(device: str):
    """One backend (streams, timing kernels, scratch) per device and process: a resident worker's tasks share it."""
    if device not in _backends:
        before = guard.native_threads()
        if device == "cuda":
            # a context made while another process times kernels on this GPU would stall them (gpus.quiet); only
            # its making holds the lock (cudaFree(0) makes it): not CuPy's import (seconds on a host busy with the
            # run's compiles), and the backend's modules and buffers load into it after
            import cupy

            with gpus.quiet(exclusive=False):
                cupy.cuda.runtime.free(0)
        _backends[device] = _create(device)
        HARNESS_THREADS.update(guard.native_threads() - before)
        if device == "cuda":
            total = _backends[device].xp.cuda.Device().mem_info[1]
            REFERENCES.budget = min(References.BUDGET_BYTES, int(References.BUDGET_SHARE * total))
    return _backends[device]


def run(task: Task, start: int, done: dict, send) -> int:
    """The task's points from `start` on (`done`: the rows before it), each reported through `send`; the exit code:
    FATAL_EXIT after a failure that may have left the device unusable."""
    try:
        variant = registry.load(task.variant_modules)[task.variant]
        if task.mode not in variant.modes:  # its kernels would read operands stored as another mode stores them
            raise ValueError(f"{task.variant} does not run in {task.mode} (it declares {', '.join(variant.modes)})")
        if task.mode == "tf32" and os.environ.get("NVIDIA_TF32_OVERRIDE") == "0":
            raise ValueError("NVIDIA_TF32_OVERRIDE=0 is set: it turns TF32 off in cuBLAS, so tf32 rows would be FP32")
        backend = _backend(task.device)
        if task.kind == "build":
            send(event="start", index=0)
            send(event="row", index=0, row=rows.build_row(variant, task, backend))
            return 0
        builds = rows.Builds(variant, task) if task.kind in ("measure", "profile") else None
        # Rows say where they ran: on a box with several GPUs, or a cluster, that is known only here. Timings are
        # checked against these facts (peak, bandwidth).
        facts = None if task.kind == "compile" else backend.facts(task.cache_dir)
    except Exception as exc:  # nothing can run: every remaining point carries the reason
        traceback.print_exc()
        row = rows.failure_row(exc)
        row["message"] = f"build failed: {row['message']}"
        for i in range(start, len(task.points)):
            send(event="row", index=i, row=row)
        return 0
    send(event="ready", device=facts)
    threads = guard.python_threads()  # before the variant's first launch
    for i in range(start, len(task.points)):
        send(event="start", index=i)
        try:
            point = task.points[i]
            if task.kind == "compile":
                row = rows.compile_row(variant, task, point)
            elif task.kind == "tune":
                row = rows.tune_row(variant, backend, task, point, facts, done)
            elif task.kind == "profile":
                row = rows.profile_row(variant, builds, backend, task, point)
            else:
                row = rows.measure_row(variant, builds, backend, task, point, facts, done)
            if row.get("status") == "ok":
                row = {**row, **rows.reached_out(threads, backend)}
        except Exception as exc:
            traceback.print_exc()
            done[i] = rows.failure_row(exc)
            send(event="row", index=i, row=done[i])
            if task.device == "cuda":
                return FATAL_EXIT
            continue
        done[i] = row
        send(event="row", index=i, row=row)
    return 0


def _done_rows(path) -> dict:
    return {int(i): row for i, row in json.loads(Path(path).read_text()).items()}


def main(task_path: str, start: int, done_path: str) -> int:
    return run(Task.load(task_path), start, _done_rows(done_path), _channel())


def source_stamps(variant_modules=()) -> dict:
    """Size and modification time of every source file this process imported from the project, or from the variant
    modules a task named, and of the harness's own CUDA sources (gemmbench/**/*.cu, which it reads, not imports): a
    resident worker whose sources changed since it imported them no longer runs what a fresh one would."""
    paths = [Path(module.__file__) for name, module in list(sys.modules.items())
             if getattr(module, "__file__", None) and (Path(module.__file__).is_relative_to(ROOT) or any(
                 name == m or name.startswith(f"{m}.") for m in variant_modules))]
    stamps = {}
    for path in [*paths, *(ROOT / "gemmbench").rglob("*.cu")]:
        try:
            stat = os.stat(path)
            stamps[str(path)] = (stat.st_size, stat.st_mtime_ns)
        except OSError:
            stamps[str(path)] = None
    return stamps


def serve(address: str, idle_s: float, niceness: int = 0) -> int:
    """Resident: one task per connection, in turn, until none came for `idle_s` seconds, one failed fatally, or the
    sources changed, `niceness` nicer than the job that started it (supervise.BUILDS_NICENESS for the builds'). The
    job that connects holds the address's lock meanwhile (supervise.Resident)."""
    os.nice(niceness)
    _channel()  # kernels' prints to stderr, as in a one-task worker
    faulthandler.enable()  # a crash leaves its cause in the log the job reads
    modules: set[str] = set()
    watched = source_stamps()
    threads = guard.python_threads()
    with contextlib.suppress(FileNotFoundError):
        os.unlink(address)  # left by a worker that was killed
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(address)
        server.listen(1)
        server.settimeout(idle_s)
        while True:
            try:
                conn, _ = server.accept()
            except TimeoutError:  # idle: nothing of it is left behind
                _remove(address)
                return 0
            conn.settimeout(None)
            try:
                with conn, conn.makefile("rw", buffering=1) as stream:
                    send = _sender(stream)
                    request = json.loads(stream.readline())
                    if any(stamp != watched.get(path, stamp) for path, stamp in source_stamps(modules).items()):
                        send(event="stale")
                        return 0
                    send(event="hello", pid=os.getpid())
                    task = Task.load(request["task"])
                    code = run(task, request["start"], _done_rows(request["done"]), send)
                    # what the task imported (its variant) is watched too, as it was before the job can go on
                    modules.update(task.variant_modules)
                    watched = {**source_stamps(modules), **watched}
                    differs = _not_fresh(threads)
                    if differs:
                        print(f"worker: not reused: {differs}", file=sys.stderr)
                    if code or differs:  # no job may connect to it while it exits
                        os.unlink(address)
                    send(event="end", code=code)
            except (BrokenPipeError, ConnectionResetError):  # the job is gone (killed): so is its worker, quietly
                _remove(address)
                return 0
            if differs:  # a fresh process for the next job (without waiting for whatever still runs here)
                exit_now(code)
            rows.clear_builds()  # compiled kernels are the job's; the references stay for the next variant
            if "cuda" in _backends:  # and the memory the job's arrays held goes back to the device
                _backends["cuda"].xp.get_default_memory_pool().free_all_blocks()
            if code:
                return code


def _remove(address: str) -> None:
    """What a resident worker leaves when it ends: its socket, its log and, where no job holds it, its lock."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(address)
    Path(address).with_suffix(".log").unlink(missing_ok=True)
    locks.remove_if_free(Path(address).with_suffix(".lock"))


def _not_fresh(threads: frozenset) -> str | None:
    """What a task left in this worker that a fresh one would not have and the next variant would meet: a hook,
    another switch interval or timer, Python threads beyond the harness's own (`threads`: those when it started),
    native threads at work (an idle pool of a variant's runtime stays), or work still running on the device. None:
    the next task may run here."""
    found = guard.tampering()
    if found:
        return found
    left = guard.left_behind(threads)
    if left:
        return f"{len(left)} thread(s) left running ({', '.join(left)[:200]})"
    busy = guard.busy_threads(guard.native_threads() - STARTED_THREADS - HARNESS_THREADS)
    if busy:  # a runtime's idle pool stays; a thread still at work would share the cores with the next timing
        return f"{len(busy)} thread(s) a variant started still running"
    return next((busy for busy in (b.device_busy() for b in _backends.values()) if busy), None)


STARTED_THREADS = guard.native_threads()


def exit_now(code: int) -> None:
    """The process ends here, its CUDA context (if it made one) destroyed while no other process times kernels on
    its GPU (gpus.quiet): left to the exit, the driver would tear it down at any moment. Nothing else runs after
    it, neither finalisers nor threads still at work."""
    sys.stdout.flush()
    sys.stderr.flush()
    if "cuda" in _backends:
        with gpus.quiet(exclusive=False):
            with contextlib.suppress(Exception):
                _backends["cuda"].xp.cuda.runtime.deviceReset()
            os._exit(code)
    os._exit(code)


if __name__ == "__main__":
    if sys.argv[1] == "--serve":
        exit_now(serve(sys.argv[2], float(sys.argv[3]), int(sys.argv[4])))
    exit_now(main(sys.argv[1], int(sys.argv[2]), sys.argv[3]))

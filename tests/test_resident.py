"""The resident worker (gemmbench/run/supervise.py, Resident): the measure jobs of a run share one worker process and
its fp64 references, and one whose sources changed since it imported them is replaced, not reused."""
import logging
import os
import re
from pathlib import Path

from gemmbench import ROOT, configuration
from gemmbench.stages import build, measure


def _measure(cfg, tmp_path, key):
    build.run(cfg, key, "fp32", tmp_path / f"{key.replace('/', '-')}.json")
    checked, _ = measure.run(cfg, key, "fp32", tmp_path / f"{key.replace('/', '-')}.json",
                                tmp_path / "validate.json", tmp_path / "bench.json")
    return checked


def _workers(caplog, pool: str = "") -> list[tuple[str, int]]:
    """(how, pid) of each worker the measure jobs above used (or the build jobs: pool " (builds)"), from their log
    lines."""
    return [(m.group(1), int(m.group(2))) for m in
            (re.match(rf"worker{re.escape(pool)}: (started|resident, reused) \(pid (\d+)\)", r.getMessage())
             for r in caplog.records) if m]


def test_the_measure_jobs_of_a_run_share_one_worker_and_its_references(cpu_config, tmp_path, caplog):
    cpu_config.update(square_sizes=[64], validation_shapes=[[7, 13, 5]], cache_dir=str(tmp_path / "cache"))
    cfg = configuration.validate(cpu_config)
    caplog.set_level(logging.INFO, logger="gemmbench")
    first = _measure(cfg, tmp_path, "cpu/numpy-blas")
    second = _measure(cfg, tmp_path, "cpu/numba-tiled")
    (how_a, pid_a), (how_b, pid_b) = _workers(caplog)
    assert (how_a, how_b) == ("started", "resident, reused") and pid_a == pid_b
    # the builds too share a worker, of their own: it would make and destroy a CUDA context each time otherwise
    (how_a, build_a), (how_b, build_b) = _workers(caplog, " (builds)")
    assert (how_a, how_b) == ("started", "resident, reused") and build_a == build_b != pid_a
    assert all(r["status"] == "ok" for r in first + second)
    # the second variant checks against the references the first one's job computed, on the same inputs
    assert all(r["fp64_reference_s"] > 0 for r in first)
    assert all(r["fp64_reference_s"] == 0 for r in second)
    assert [r["max_abs_reference"] for r in first] == [r["max_abs_reference"] for r in second]


def test_the_builds_workers_yield_the_cores_to_the_workers_that_time(cpu_config, tmp_path, caplog):
    """Compiles beside a job that times (a search, a CPU variant's points) run nicer than it, by BUILDS_NICENESS."""
    from gemmbench.run import supervise

    cpu_config.update(square_sizes=[64], validation_shapes=[[7, 13, 5]], cache_dir=str(tmp_path / "cache"))
    caplog.set_level(logging.INFO, logger="gemmbench")
    _measure(configuration.validate(cpu_config), tmp_path, "cpu/numpy-blas")
    (_, timing), (_, builds) = _workers(caplog)[0], _workers(caplog, " (builds)")[0]
    own = os.getpriority(os.PRIO_PROCESS, 0)
    assert os.getpriority(os.PRIO_PROCESS, timing) == own  # resident, both, until idle for RESIDENT_IDLE_S
    assert os.getpriority(os.PRIO_PROCESS, builds) == min(own + supervise.BUILDS_NICENESS, 19)


KERNEL = """
import numpy as np
from kernels.registry import Built, Variant, register

def _run(artifact, a, b, c, stream):
    np.matmul(a, b, out=c)

register(Variant(family="cpu", name="edited-matmul", device="cpu", modes=("fp32",), run=_run,
                 build=lambda mode, params, cache_dir: Built(None, {"compile_s": 0.0}), description="a kernel edited"))
"""


def test_a_worker_whose_variant_module_changed_is_replaced(cpu_config, tmp_path, caplog, monkeypatch):
    """An edit to a kernel between two jobs of a run: the second job runs the edited code in a fresh worker."""
    modules = tmp_path / "modules"
    modules.mkdir()
    (modules / "edited_kernel.py").write_text(KERNEL)
    monkeypatch.syspath_prepend(str(modules))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(modules), str(ROOT)]))
    cpu_config.update(variant_modules=["edited_kernel"], square_sizes=[32], validation_shapes=[[7, 13, 5]],
                      cache_dir=str(tmp_path / "cache"))
    cfg = configuration.validate(cpu_config)
    caplog.set_level(logging.INFO, logger="gemmbench")
    _measure(cfg, tmp_path, "cpu/edited-matmul")
    (modules / "edited_kernel.py").write_text(KERNEL + "\n# edited\n")
    _measure(cfg, tmp_path, "cpu/edited-matmul")
    (how_a, pid_a), (how_b, pid_b) = _workers(caplog)
    assert (how_a, how_b) == ("started", "started") and pid_a != pid_b


def test_a_resident_worker_whose_job_was_killed_ends_quietly_and_leaves_nothing_behind(cpu_config, tmp_path):
    """A job killed (kill -9) while its resident worker runs a task: the worker's next report finds no one, and it
    ends with exit status 0, no traceback, and neither its socket, its log nor its slot's lock left."""
    import json
    import socket
    import subprocess
    import sys
    import time

    from gemmbench.run.task import Point, Task
    from kernels import registry

    cpu_config.update(variant_modules=["tests.planted"], cache_dir=str(tmp_path / "cache"))
    cfg = configuration.validate(cpu_config)
    variant = registry.load(["tests.planted"])["cpu/planted-tunable"]
    points = [Point({"m": n, "n": n, "k": n}, n, stage="validate") for n in (32, 48, 64, 80, 96, 112)]
    task_path, done_path = tmp_path / "task.json", tmp_path / "done.json"
    Task.of("measure", cfg, variant, "fp32", points).save(task_path)
    done_path.write_text("{}")
    address = tmp_path / "w-0.sock"
    for left in (address.with_suffix(".log"), address.with_suffix(".lock")):
        left.touch()
    with open(tmp_path / "stderr.txt", "w") as stderr:
        worker = subprocess.Popen([sys.executable, "-m", "gemmbench.run.worker", "--serve", str(address), "600", "0"],
                                  cwd=ROOT, stderr=stderr, env={**os.environ, "PYTHONPATH": str(ROOT)})
        while not address.exists():
            assert worker.poll() is None, (tmp_path / "stderr.txt").read_text()
            time.sleep(0.05)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.connect(str(address))
            client.sendall((json.dumps({"task": str(task_path), "start": 0, "done": str(done_path)}) + "\n").encode())
            assert b"hello" in client.recv(4096)
        assert worker.wait() == 0  # the job is gone: its worker with it, not after 600 s idle
    assert "Traceback" not in (tmp_path / "stderr.txt").read_text()
    assert not [p.name for p in tmp_path.glob("w-0.*")]


def test_a_job_whose_worker_did_not_stay_leaves_no_socket_log_or_lock(tmp_path, monkeypatch):
    """Where a job's resident worker exited (not reused, a fatal task) or was killed, the job's end removes its
    slot's socket, log and lock; where it stays for the next job, they stay with it."""
    import subprocess
    import sys

    from gemmbench.run import supervise

    monkeypatch.setattr(supervise, "RESIDENT_DIR", tmp_path)
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    # (its pid, whether its socket is there when the job ends, what is left of the slot)
    for pid, listening, left in ((gone.pid, True, []), (os.getpid(), False, []),
                                 (os.getpid(), True, ["sock", "log", "lock"])):
        with supervise.Resident({"A": str(pid), "B": str(listening)}, 10.0) as worker:
            worker.pid = pid
            Path(worker.address).touch()
            worker.log.touch()
            if not listening:  # a worker on its way out removes its socket first
                Path(worker.address).unlink()
        assert sorted(p.suffix[1:] for p in tmp_path.glob(f"{worker.key}-*")) == sorted(left)


SLOW_BUILD = """
import time
import numpy as np
from kernels.registry import Built, Variant, register

def _build(mode, params, cache_dir):
    time.sleep(0.5)  # a compile
    return Built(None, {"compile_s": 0.5})

def _run(artifact, a, b, c, stream):
    np.matmul(a, b, out=c)

register(Variant(family="cpu", name="slow-build", device="cpu", modes=("fp32",), run=_run, build=_build,
                 description="a kernel that takes half a second to build"))
"""


def test_the_seconds_a_measure_job_spends_building_its_kernel_are_in_the_first_row_that_needs_it(
        cpu_config, tmp_path, monkeypatch):
    """The measure job builds (or loads) its kernel before its first point: those seconds are that row's load_s,
    which the report's time breakdown shows apart from the job's overhead."""
    modules = tmp_path / "modules"
    modules.mkdir()
    (modules / "slow_build.py").write_text(SLOW_BUILD)
    monkeypatch.syspath_prepend(str(modules))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(modules), str(ROOT)]))
    cpu_config.update(variant_modules=["slow_build"], square_sizes=[32, 64], validation_shapes=[[7, 13, 5]],
                      cache_dir=str(tmp_path / "cache"))
    cfg = configuration.validate(cpu_config)
    build.run(cfg, "cpu/slow-build", "fp32", tmp_path / "build.json")
    checked, timed = measure.run(cfg, "cpu/slow-build", "fp32", tmp_path / "build.json", tmp_path / "validate.json",
                                 tmp_path / "bench.json")
    loads = [r["load_s"] for r in checked + timed]
    assert loads[0] >= 0.5 and all(load < 0.5 for load in loads[1:]), loads


def test_the_builds_pool_has_a_slot_per_core_and_a_job_waits_for_one(tmp_path, monkeypatch):
    """Each worker of the builds' pool makes a CUDA context beside the job that times: jobs that fan their compiles out
    over the cores take turns at the pool's slots rather than start more workers than there are cores."""
    import threading

    from gemmbench.run import supervise

    monkeypatch.setattr(supervise, "RESIDENT_DIR", tmp_path)
    monkeypatch.setattr(supervise, "compile_workers", lambda: 1)
    entered = threading.Event()

    def second_job():
        with supervise.Resident({}, 10.0, "builds") as worker:
            slots.append(worker.address)
            entered.set()

    slots = []
    with supervise.Resident({}, 10.0, "builds") as first:
        slots.append(first.address)
        waiting = threading.Thread(target=second_job)
        waiting.start()
        assert not entered.wait(0.5)  # the one slot is taken: the second job waits
    waiting.join()
    assert len(slots) == 2 and slots[0] == slots[1]  # then takes the same slot (and its worker)
    with supervise.Resident({}, 10.0) as one, supervise.Resident({}, 10.0) as other:  # the GPU's pool: a slot each
        assert one.address != other.address

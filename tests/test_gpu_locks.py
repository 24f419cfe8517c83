"""GPU pinning on a box with several GPUs, with fake devices: each job gets a GPU of its own, never a shared one."""
import multiprocessing
import os
import time

import pytest

from gemmbench.run import gpus

DEVICES = ["GPU-fake-0", "GPU-fake-1"]


def _job(lock_dir, hold_s, results):
    with gpus.claim(DEVICES, lock_dir, poll_s=0.02) as device:
        start = time.monotonic()
        time.sleep(hold_s)
        results.put((device, start, time.monotonic()))


def test_jobs_get_a_device_of_their_own_and_wait_when_all_are_taken(tmp_path):
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    jobs = [context.Process(target=_job, args=(tmp_path, 0.3, results)) for _ in range(6)]
    for job in jobs:
        job.start()
    held = [results.get(timeout=30) for _ in jobs]
    for job in jobs:
        job.join(timeout=10)
    assert {device for device, _, _ in held} == set(DEVICES)
    for device in DEVICES:
        spans = sorted((start, end) for d, start, end in held if d == device)
        assert all(end <= next_start for (_, end), (next_start, _) in zip(spans, spans[1:])), f"{device} shared"
    # both devices were busy at once: the jobs ran side by side, not one after another
    first = sorted(held, key=lambda h: h[1])
    assert first[1][1] < first[0][2]


def test_a_lock_is_released_when_its_holder_dies(tmp_path):
    context = multiprocessing.get_context("fork")
    holder = context.Process(target=_job, args=(tmp_path, 60, context.Queue()))
    holder.start()
    time.sleep(0.5)
    holder.kill()
    holder.join()
    results = context.Queue()
    after = context.Process(target=_job, args=(tmp_path, 0, results))
    after.start()
    try:
        assert results.get(timeout=10)[0] == DEVICES[0]  # the first device is free again
    finally:
        after.kill()


def test_pinning_sets_the_workers_gpu_and_respects_a_given_one(monkeypatch, tmp_path):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(gpus, "uuids", lambda: DEVICES)
    monkeypatch.setattr(gpus, "LOCK_DIR", tmp_path)
    with gpus.pinned("cuda") as first, gpus.pinned("cuda") as second:
        assert [first, second] == [{"CUDA_VISIBLE_DEVICES": d} for d in DEVICES]
    with gpus.pinned("cuda") as first, gpus.pinned("cuda", exclusive=False) as shared:
        assert shared == first == {"CUDA_VISIBLE_DEVICES": DEVICES[0]}  # a build shares the first GPU, held or not
    with gpus.pinned("cpu") as env:
        assert env == {}
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")  # SLURM (or the user) chose one: used, and locked by its UUID
    with gpus.pinned("cuda") as env:
        assert env == {"CUDA_VISIBLE_DEVICES": "1"}
        assert (tmp_path / f"{DEVICES[1]}.lock").exists()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")  # the user's choice of several: handed out among them
    with gpus.pinned("cuda") as first, gpus.pinned("cuda") as second:
        assert [first, second] == [{"CUDA_VISIBLE_DEVICES": "2"}, {"CUDA_VISIBLE_DEVICES": "3"}]


def test_the_tasks_of_a_block_holding_the_processes_gpu_run_there_without_claiming_it_again(monkeypatch, tmp_path):
    """A variant's own search holds its GPU and sets it for its workers; each round's tasks pin again. On a box of
    one GPU that claim waited for the search itself, for ever (MetaSchedule's seeded search on an H200)."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(gpus, "uuids", lambda: DEVICES[:1])
    monkeypatch.setattr(gpus, "LOCK_DIR", tmp_path)

    def waits(_):
        raise AssertionError("the task waited for a GPU its own process holds")
    monkeypatch.setattr(gpus.time, "sleep", waits)
    with gpus.pinned("cuda") as search, gpus.environment(search):
        with gpus.pinned("cuda") as task:
            assert task == search == {"CUDA_VISIBLE_DEVICES": DEVICES[0]}
    assert not gpus.HELD
    with gpus.pinned("cuda"), pytest.raises(AssertionError, match="waited"):  # another job of one process still waits
        with gpus.pinned("cuda"):
            pass


def test_a_gpu_named_by_index_or_by_uuid_is_one_lock_whoever_names_it(monkeypatch, tmp_path):
    """Two runs on one box, one given CUDA_VISIBLE_DEVICES=1 and the other its UUID, wait for each other."""
    monkeypatch.setattr(gpus, "uuids", lambda: DEVICES)
    monkeypatch.setattr(gpus, "LOCK_DIR", tmp_path)
    assert gpus.lock_names(["1", DEVICES[1]], DEVICES) == [DEVICES[1]] * 2
    assert gpus.lock_names(["GPU-ab"], ["GPU-abc1", "GPU-xyz"]) == ["GPU-abc1"]  # a UUID's prefix, as CUDA takes it
    context = multiprocessing.get_context("fork")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    results = context.Queue()

    def hold(given):
        import os
        os.environ["CUDA_VISIBLE_DEVICES"] = given
        with gpus.pinned("cuda"):
            start = time.monotonic()
            time.sleep(0.3)
            results.put((start, time.monotonic()))

    jobs = [context.Process(target=hold, args=(given,)) for given in ("1", DEVICES[1])]
    for job in jobs:
        job.start()
    spans = sorted(results.get(timeout=30) for _ in jobs)
    for job in jobs:
        job.join(timeout=10)
    assert spans[0][1] <= spans[1][0]  # one after the other


def test_the_lock_place_does_not_follow_tmpdir(monkeypatch, tmp_path):
    import importlib
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    assert importlib.reload(gpus).LOCK_DIR == gpus.Path("/tmp/gemmbench-gpu-locks")


def test_a_jobs_environment_is_set_for_the_block_and_restored_after(monkeypatch):
    """For the worker processes a library starts itself (TVM's search): set while the job runs, as before after."""
    import os

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    monkeypatch.delenv("GEMMBENCH_TEST_UNSET", raising=False)
    with gpus.environment({"CUDA_VISIBLE_DEVICES": DEVICES[1], "GEMMBENCH_TEST_UNSET": "1"}):
        assert os.environ["CUDA_VISIBLE_DEVICES"] == DEVICES[1] and os.environ["GEMMBENCH_TEST_UNSET"] == "1"
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "0,1" and "GEMMBENCH_TEST_UNSET" not in os.environ


def _make_context(lock_dir, device, hold_s, results):
    import os
    os.environ["CUDA_VISIBLE_DEVICES"] = device
    with gpus.quiet(exclusive=False, lock_dir=lock_dir):
        results.put(("made", time.monotonic()))
        time.sleep(hold_s)
    results.put(("done", time.monotonic()))


def _held_context(tmp_path, hold_s: float):
    """(the spawn context, its result queue, a process that makes a context on DEVICES[0] and holds it for `hold_s`),
    once it holds it. Spawned, not forked: a forked child would share the lock that its parent holds."""
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    maker = context.Process(target=_make_context, args=(tmp_path, DEVICES[0], hold_s, results))
    maker.start()
    assert results.get(timeout=30)[0] == "made"
    return context, results, maker


def test_a_timed_stretch_waits_while_a_context_is_made_and_holds_new_ones_off(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", DEVICES[0])
    context, results, maker = _held_context(tmp_path, 0.5)
    with gpus.quiet(exclusive=True, lock_dir=tmp_path) as waited:
        timed_at = time.monotonic()
        done_at = results.get(timeout=30)[1]
        assert waited is not None and done_at <= timed_at  # the context was made before the timing began
        # a context made on another GPU does not wait; one on this GPU does, until the timing ends
        other = context.Process(target=_make_context, args=(tmp_path, DEVICES[1], 0, results))
        other.start()
        assert results.get(timeout=30)[0] == "made"
        results.get(timeout=30)
        blocked = context.Process(target=_make_context, args=(tmp_path, DEVICES[0], 0, results))
        blocked.start()
        time.sleep(0.5)
        assert results.empty()
        ended = time.monotonic()
    assert results.get(timeout=30)[1] >= ended
    for process in (maker, other, blocked):
        process.join(timeout=10)


def test_contexts_that_come_while_a_timed_stretch_waits_go_after_it(tmp_path, monkeypatch):
    """A stream of contexts made one after another (a run's first builds) would hold the shared lock without a gap;
    one that comes while a timing waits for the lock goes after the timing."""
    import fcntl
    import threading

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", DEVICES[0])
    context, results, first = _held_context(tmp_path, 2.0)
    timed = threading.Event()
    entered = []

    def timing():
        with gpus.quiet(exclusive=True, lock_dir=tmp_path):
            entered.append(time.monotonic())
            timed.set()
            time.sleep(0.2)
    timer = threading.Thread(target=timing)
    timer.start()
    turnstile = os.open(tmp_path / f"{gpus.lock_name(DEVICES[0])}.quiet-turnstile", os.O_RDONLY | os.O_CREAT)
    looked = time.monotonic()
    while not timed.is_set() and time.monotonic() - looked < 0.5:  # until the timing waits at the turnstile
        try:
            fcntl.flock(turnstile, fcntl.LOCK_SH | fcntl.LOCK_NB)
            fcntl.flock(turnstile, fcntl.LOCK_UN)
            time.sleep(0.001)
        except BlockingIOError:
            break
    os.close(turnstile)
    later = context.Process(target=_make_context, args=(tmp_path, DEVICES[0], 0, results))
    later.start()
    made = [t for what, t in (results.get(timeout=30) for _ in range(3)) if what == "made"]
    timer.join(timeout=30)
    assert len(made) == 1 and made[0] >= entered[0]
    for process in (first, later):
        process.join(timeout=10)


def test_a_timed_stretch_goes_on_without_the_lock_when_it_never_frees(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", DEVICES[0])
    monkeypatch.setattr(gpus, "QUIET_WAIT_S", 0.2)
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    maker = context.Process(target=_make_context, args=(tmp_path, DEVICES[0], 5, results))
    maker.start()
    results.get(timeout=30)
    with gpus.quiet(exclusive=True, lock_dir=tmp_path) as waited:
        assert waited is None
    maker.kill()
    maker.join(timeout=10)


def test_no_quiet_lock_where_the_process_is_not_pinned_to_one_gpu(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", ",".join(DEVICES))
    with gpus.quiet(exclusive=True, lock_dir=tmp_path) as waited:
        assert waited is None
    assert not list(tmp_path.iterdir())

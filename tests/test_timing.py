import math

import numpy as np
import pytest

from gemmbench.measure import devices, timing


def test_median_ci_is_never_below_half_the_timers_step_and_shrinks_with_n():
    assert timing.median_ci_rel([2.0] * 10) == 0  # no step known: nothing to floor at
    assert timing.median_ci_rel([2.0] * 10, resolution_s=0.5) == pytest.approx(0.125)  # the timer's nominal step
    quantised = [1.0] * 60 + [1.25] * 20 + [0.75] * 20  # samples on a 0.25 grid, IQR 0.25
    assert timing.median_ci_rel(quantised * 100) == pytest.approx(0.125)  # more samples do not beat the step
    rng = np.random.default_rng(0)
    noisy = 1 + 0.01 * rng.standard_normal(10_000)
    assert timing.median_ci_rel(noisy[:100]) > timing.median_ci_rel(noisy)
    # 1.57 * IQR / sqrt(n): IQR of N(0, 0.01) is 0.0135
    assert timing.median_ci_rel(noisy) == pytest.approx(1.57 * 0.0135 / 100, rel=0.05)
    assert math.isinf(timing.median_ci_rel([1.0]))


def test_sampler_stops_when_the_median_is_stable_but_not_before_min_samples():
    s = timing.Sampler(min_samples=5, max_samples=100, rel_precision=0.01, budget_s=60)
    for i in range(4):
        s.add(1.0)
        assert not s.done
    s.add(1.0)
    assert s.done and s.converged


def test_sampler_keeps_sampling_noisy_points_until_max_samples():
    s = timing.Sampler(min_samples=3, max_samples=20, rel_precision=1e-6, budget_s=60)
    rng = np.random.default_rng(1)
    while not s.done:
        s.add(1 + rng.random())
    assert len(s.device_s) == 20 and not s.converged
    summary = s.summary()
    assert summary["samples"] == 20 and summary["converged"] is False
    assert summary["median_s"] == pytest.approx(float(np.median(s.device_s)))


def test_a_trial_clearly_behind_stops_after_its_first_samples_but_not_on_one_slow_sample_or_an_unbatched_one():
    """Its fastest sample over behind_s after BEHIND_SAMPLES: it cannot be the pick. One sample under it (a dip met
    the others) goes on; so does a kernel short enough to be timed in batches, whose one-launch samples also time
    the gap beside the launch."""
    ms = 1e-3  # samples far shorter than BEHIND_SPAN_S

    def sampler(**kwargs):
        return timing.Sampler(min_samples=5, max_samples=50, rel_precision=1e-9, budget_s=60, behind_s=1.25 * ms,
                              **kwargs)

    behind = sampler()
    for _ in range(timing.BEHIND_SAMPLES - 1):
        behind.add(2 * ms)
        assert not behind.done
    behind.add(2 * ms)
    assert behind.stopped_by == "behind" and not behind.converged and not behind.summary()["thin_median"]
    near, unbatched = sampler(), sampler(short_s=5 * ms)
    for sample in (2 * ms, 2 * ms, 1.2 * ms):
        near.add(sample)
        unbatched.add(2 * ms)
    assert not near.done and unbatched.stopped_by != "behind"


def test_a_kernel_of_seconds_clearly_behind_stops_after_as_few_samples_as_span_a_dip_several_times():
    """A sample that spans BEHIND_SPAN_S holds a power cap's dip (a tenth of a second) as a small part of it: one is
    enough to say a trial of a kernel that takes a second is behind, and samples that add up to it are too."""
    def sampler(**kwargs):
        return timing.Sampler(min_samples=5, max_samples=50, rel_precision=1e-9, budget_s=60, **kwargs)

    seconds_long = sampler(behind_s=1.25)
    seconds_long.add(2.0)
    assert seconds_long.stopped_by == "behind"
    half_span = timing.BEHIND_SPAN_S / 2
    two = sampler(behind_s=half_span)
    two.add(1.1 * half_span)
    assert not two.done
    two.add(1.1 * half_span)
    assert two.stopped_by == "behind"
    assert [timing.behind_samples(s) for s in (1e-3, half_span, 2 * timing.BEHIND_SPAN_S)] == \
        [timing.BEHIND_SAMPLES, 2, 1]


def test_sampler_stops_at_the_budget_after_min_samples():
    s = timing.Sampler(min_samples=3, max_samples=1000, rel_precision=1e-9, budget_s=0.0)
    s.add(1.0)
    s.add(2.0)
    assert not s.done  # min_samples first, whatever the budget
    s.add(3.0)
    assert s.done


def test_budget_cuts_a_slow_kernel_short_of_min_samples_but_keeps_three():
    s = timing.Sampler(min_samples=10, max_samples=1000, rel_precision=1e-9, budget_s=0.0)
    s.add(1.0)
    s.add(2.0)
    assert not s.done
    s.add(3.0)
    assert s.done and not s.converged


class CountingBackend:
    """A clock that returns scripted device times and counts flushes."""

    TIMER_RESOLUTION_S = 1e-9
    BATCHES_SHORT_KERNELS = False

    def __init__(self):
        self.flushes = 0
        self.calls = 0

    def synchronize(self):
        pass

    def flush_cache(self):
        self.flushes += 1

    def device_time(self, run):
        run()
        return 1e-3

    def host_time(self, run):
        run()
        return 2e-3


@pytest.mark.parametrize("cache, flushes_per_sample", [("hot", 0), ("cold", 1)])
def test_sample_flushes_only_for_cold_cache(cache, flushes_per_sample):
    backend = CountingBackend()
    runs = []
    cfg = {"min_samples": 4, "max_samples": 4, "rel_precision": 0.5, "budget_s": 10, "min_time_s": 0}
    host_s = timing.warm_up(backend, lambda: runs.append("w"), 3)
    s = timing.sample(backend, lambda: runs.append("s"), cfg, cache)
    assert runs.count("w") == 3 and runs.count("s") == 4  # warm-up launches timed on the host, samples on the device
    assert backend.flushes == flushes_per_sample * 4
    assert host_s == [2e-3] * 3 and s.summary()["median_s"] == 1e-3


def test_warm_up_runs_at_least_the_count_and_for_at_least_the_time():
    backend, runs = CountingBackend(), []
    timing.warm_up(backend, lambda: runs.append(1), runs=2, seconds=0.0)
    assert len(runs) == 2
    runs.clear()
    clock = __import__("time").perf_counter
    started = clock()
    timing.warm_up(backend, lambda: (runs.append(clock()), __import__("time").sleep(0.01)), runs=1, seconds=0.1)
    # on a loaded machine a 10 ms sleep may take far longer, so judge the time covered, not the launches
    assert clock() - started >= 0.1 and len(runs) >= 1


@pytest.mark.parametrize("host_s, batches, warmed", [(2e-3, True, True), (2e-5, True, False), (2e-5, False, True)])
def test_a_short_gpu_kernel_spends_no_warm_up_seconds(host_s, batches, warmed):
    """Launched and synchronised one by one, a kernel under BATCH_TARGET_S leaves a GPU idle most of the time: no
    clock settles under that load, so its warm-up is the launch count. A CPU's calls keep the CPU busy."""
    import time

    class Backend(CountingBackend):
        BATCHES_SHORT_KERNELS = batches

        def host_time(self, run):
            run()
            return host_s

    runs, started = [], time.perf_counter()
    timing.warm_up(Backend(), lambda: runs.append(1), runs=2, seconds=0.2)
    assert (time.perf_counter() - started >= 0.2) == warmed and (len(runs) == 2) != warmed


def test_a_busy_device_is_warm_already():
    """Seconds of warm-up count from when the device's stretch of work began: a point run right after another
    needs only the launch count."""
    import time

    backend, runs = CountingBackend(), []
    timing.warm_up(backend, lambda: runs.append(1), runs=2, seconds=0.5, busy_since=time.perf_counter() - 1.0)
    assert len(runs) == 2


def test_sampling_runs_for_min_time_even_once_the_median_is_stable():
    s = timing.Sampler(min_samples=3, max_samples=1000, rel_precision=0.01, budget_s=60, min_time_s=1.0)
    for _ in range(7):
        s.add(0.125)
    assert s.converged and not s.done  # stable, but only 0.875 s of samples
    s.add(0.125)
    assert s.done and s.stopped_by == "precision"


def test_a_power_capped_window_spans_capped_span_s_whatever_precision_and_max_samples_say(monkeypatch):
    """While the device is held down by power, neither a stable median nor max_samples ends the sampling before it
    spans capped_span_s of wall time; the budget still does. An unslowed device stops as before."""
    now = [0.0]
    monkeypatch.setattr(timing.time, "perf_counter", lambda: now[0])

    def sampled(slowed: bool, budget_s: float = 60) -> timing.Sampler:
        s = timing.Sampler(min_samples=3, max_samples=5, rel_precision=0.01, budget_s=budget_s, min_time_s=0.0,
                           capped_span_s=1.0, slowed=lambda: slowed)
        while not s.done:
            s.add(0.01)
            now[0] += 0.02  # a sample and its accounting
        return s

    free = sampled(False)
    assert free.stopped_by == "precision" and len(free.device_s) == 3
    start = now[0]
    capped = sampled(True)
    assert capped.stopped_by == "precision" and now[0] - start >= 1.0 and len(capped.device_s) > 5
    start = now[0]
    cut = sampled(True, budget_s=0.5)
    assert cut.stopped_by == "budget" and now[0] - start < 1.0


def test_converged_means_the_precision_target_was_met_whatever_ended_sampling():
    """A fast kernel stopped by max_samples before min_time_s is still converged if its CI met the target; a slow
    one cut by the budget short of min_samples is neither converged nor a full median."""
    fast = timing.Sampler(min_samples=10, max_samples=20, rel_precision=0.01, budget_s=60, min_time_s=1.0)
    while not fast.done:
        fast.add(1e-5)
    summary = fast.summary()
    assert summary["converged"] and summary["stopped_by"] == "max_samples" and not summary["thin_median"]
    slow = timing.Sampler(min_samples=10, max_samples=20, rel_precision=0.01, budget_s=0.0)
    for t in (1.0, 1.1, 0.9):
        slow.add(t)
    summary = slow.summary()
    assert not summary["converged"] and summary["stopped_by"] == "budget" and summary["thin_median"]


def test_clocks_are_read_over_the_whole_window_and_a_dip_inside_it_shows():
    from gemmbench.measure.devices import ClockWatch

    clocks = iter([1980, 1980, 1500, 1980] + [1980] * 1000)

    def read():
        clock = next(clocks)
        return {"sm_clock_mhz": clock, "slowdown": ["sw_power_cap"] if clock < 1980 else []}

    with ClockWatch(read, interval_s=0.001) as window:
        __import__("time").sleep(0.05)
    summary = window.summary()
    assert summary["clock_reads"] >= 5 and summary["sm_clock_min_mhz"] == 1500
    assert 1500 < summary["sm_clock_mean_mhz"] < 1980 and 0 < summary["slowdown_share"] < 0.5
    assert summary["slowdown"] == ["sw_power_cap"] and window.slowed
    with ClockWatch(None) as nothing:  # a CPU: no telemetry, no columns
        pass
    assert nothing.summary() == {}


class PowerCappedBackend(CountingBackend):
    """A GPU whose SM clock falls under the kernel's load, by `drop` MHz a launch, from 1980 to `floor`, slowed down
    by its power cap meanwhile and at the floor."""

    def __init__(self, drop, floor=1600, telemetry=True):
        super().__init__()
        self.clock, self.drop, self.floor, self.has_telemetry = 1980, drop, floor, telemetry

    def host_time(self, run):
        __import__("time").sleep(0.001)
        self.clock = max(self.floor, self.clock - self.drop)
        return super().host_time(run)

    def telemetry(self):
        if not self.has_telemetry:
            return {}
        return {"sm_clock_mhz": self.clock, "slowdown": ["sw_power_cap"] if self.clock < 1980 else []}

    def watch(self):
        from gemmbench.measure.devices import ClockWatch

        return ClockWatch(self.telemetry if self.has_telemetry else None, interval_s=0.001)


def test_warm_up_goes_on_until_a_power_capped_clock_has_settled(monkeypatch):
    monkeypatch.setattr(timing, "SETTLE_MAX_S", 3600.0)  # however slow this machine, the clock gets to settle
    backend, runs = PowerCappedBackend(drop=40), []
    assert timing.settle(backend, lambda: runs.append(1)) > 0
    assert backend.clock == backend.floor  # sampling starts at the clock it will stay at
    steady, runs = PowerCappedBackend(drop=0), []
    timing.settle(steady, lambda: runs.append(1))
    assert steady.clock == 1980 and len(runs) >= 1  # one window, no slowdown: nothing to wait for
    no_telemetry, runs = PowerCappedBackend(drop=40, telemetry=False), []
    assert timing.settle(no_telemetry, lambda: runs.append(1)) == 0 and not runs  # a CPU


def test_a_warm_up_that_spans_a_settling_window_counts_as_the_first():
    long_kernel = lambda: __import__("time").sleep(timing.SETTLE_WINDOW_S)  # noqa: E731
    steady, runs = PowerCappedBackend(drop=0), []
    with steady.watch() as warming:
        steady.host_time(long_kernel)
    assert timing.settle(steady, lambda: runs.append(1), warming) == 0 and not runs  # no slowdown seen: no launch
    capped, runs = PowerCappedBackend(drop=40), []
    with capped.watch() as warming:
        capped.host_time(long_kernel)
    assert timing.settle(capped, lambda: runs.append(1), warming) > 0 and runs  # slowed down: watched on
    short, runs = PowerCappedBackend(drop=0), []
    with short.watch() as warming:
        short.host_time(lambda: None)
    timing.settle(short, lambda: runs.append(1), warming)
    assert runs  # a warm-up shorter than a window: one window of launches


def test_where_sampling_spans_a_cap_a_short_warm_up_that_saw_no_slowdown_is_not_extended(monkeypatch):
    """With capped_span_s the sampling itself spans a slowdown that begins after the warm-up: no confirming window.
    A short warm-up that saw one is still settled."""
    monkeypatch.setattr(timing, "SETTLE_MAX_S", 3600.0)
    steady, runs = PowerCappedBackend(drop=0), []
    with steady.watch() as warming:
        steady.host_time(lambda: None)
    warming.seconds = 0.0  # shorter than a window, however loaded this machine
    assert timing.settle(steady, lambda: runs.append(1), warming, spans_caps=True) == 0 and not runs
    capped, runs = PowerCappedBackend(drop=40), []
    with capped.watch() as warming:
        capped.host_time(lambda: None)
    warming.seconds = 0.0  # shorter than a window, however loaded this machine
    assert timing.settle(capped, lambda: runs.append(1), warming, spans_caps=True) > 0 and runs
    assert capped.clock == capped.floor  # settled as before: the clock it will stay at


def test_launches_too_short_to_load_the_device_one_by_one_are_not_settled():
    """Under BATCH_TARGET_S of host time a launch synchronised one at a time leaves the device idle most of a window:
    no window is run (the sampling window's clocks say whether the point was throttled)."""
    capped, runs = PowerCappedBackend(drop=40), []
    assert timing.settle(capped, lambda: runs.append(1), host_s=timing.BATCH_TARGET_S / 2) == 0 and not runs
    assert timing.settle(capped, lambda: runs.append(1), host_s=timing.BATCH_TARGET_S * 2) > 0 and runs


def test_short_kernels_are_also_timed_in_batches_and_long_or_cold_ones_are_not():
    class Batching(CountingBackend):
        def device_time(self, run, launches=1):
            self.calls += launches
            return 2e-6 + launches * 5e-6  # a fixed cost per event pair, then 5 µs per launch

    cfg = {"min_samples": 5, "max_samples": 5, "rel_precision": 0.01, "budget_s": 10, "min_time_s": 0}
    around = []

    def prepare(launches, hold=None):  # the batch's sets, fewer where memory allows fewer (hold)
        return hold or launches, lambda: None, lambda: around.append("before"), lambda: around.append("after")

    launches, batched = timing.sample_batched(Batching(), 7e-6, cfg, "hot", prepare)
    assert launches == 15 and batched.summary()["median_s"] == pytest.approx(5e-6 + 2e-6 / 15)
    assert around == ["before", "after"] * 5  # each batch prepared and accounted for, outside the timed region
    assert timing.sample_batched(Batching(), 2e-4, cfg, "hot", prepare) == (1, None)
    assert timing.sample_batched(Batching(), 7e-6, cfg, "cold", prepare) == (1, None)
    assert timing.sample_batched(Batching(), 7e-6, cfg, "hot", lambda n: prepare(n, hold=1)) == (1, None)


def test_one_launch_samples_of_a_short_gpu_kernel_stop_at_min_samples_and_go_on_where_it_cannot_batch():
    class Events(CountingBackend):  # a GPU's timer: CUDA events
        BATCHES_SHORT_KERNELS = True

        def device_time(self, run):
            self.calls += 1
            return 5e-6 * (1 + 0.1 * (self.calls % 2))  # 5 µs a launch, too noisy to converge

    cfg = {"min_samples": 4, "max_samples": 50, "rel_precision": 1e-9, "budget_s": 10, "min_time_s": 0}
    short_s = timing.short_s(Events(), "hot")
    long = timing.sample(CountingBackend(), lambda: None, cfg, "hot", short_s=short_s)
    assert len(long.device_s) == 50  # 1 ms a launch: not short
    short = timing.sample(Events(), lambda: None, cfg, "hot", short_s=short_s)
    assert len(short.device_s) == 4 and short.stopped_by == "short"
    assert timing.sample(Events(), lambda: None, cfg, "hot", sampler=short) is short
    assert len(short.device_s) == 50 and short.summary()["stopped_by"] == "max_samples"  # it went on, unbatched
    assert timing.short_s(Events(), "cold") == 0  # a cold cache is never batched: one-launch samples to the end
    assert timing.short_s(devices.Backend(), "hot") == 0  # a CPU's timer is the call: one call's median stands


def test_a_row_keeps_the_first_and_the_last_of_a_long_warm_ups_host_times():
    from gemmbench.run import bench

    host = [float(i) for i in range(10 * bench.HOST_KEPT)]
    kept = bench._kept(host)
    assert len(kept) == bench.HOST_KEPT and kept[0] == 0.0 and kept[1:] == host[-(bench.HOST_KEPT - 1):]
    assert bench._kept(host[:5]) == host[:5]


def test_the_tune_stages_trials_keep_their_short_timing_without_the_power_caps_window():
    """A trial compares candidates in one state with the tune section's timing, which keys every record: the main
    timing's capped_span_s is not merged into it."""
    from gemmbench import configuration
    from gemmbench.run.task import tune_timing

    config = configuration.validate({"timing": {"capped_span_s": 1.0, "max_samples": 200}})
    trial = tune_timing(config)
    assert "capped_span_s" not in trial and trial == {**{k: v for k, v in config["timing"].items()
                                                         if k != "capped_span_s"}, **config["tune"]["timing"]}
    assert config["timing"]["capped_span_s"] == 1.0


def test_a_searchs_trials_settle_once_per_shape_in_a_stretch_of_device_work():
    """Candidates timed back to back at one shape share the clocks' state: the first settles them; a pause long
    enough to start a new stretch, or another shape, settles again."""
    load, shape = timing.Load(), {"m": 64, "n": 64, "k": 64}
    load.begin()
    assert load.first_at(shape) and not load.first_at(dict(shape)) and load.first_at({**shape, "k": 32})
    load.end()
    load.begin()
    assert not load.first_at(shape)
    load.last -= 2 * timing.Load.IDLE_GAP_S  # as if the device had been idle since
    load.begin()
    assert load.first_at(shape)


def test_a_validations_launches_count_as_the_warm_up_only_of_its_kernel_at_its_shape_right_after_it():
    """Load.launched: the launches that ended the stretch's last work, for the same kernel at the same shape; none
    after other work, for another kernel or shape, or once a pause began a new stretch. warm_up launches only what
    `runs` asks beyond them."""
    load, kernel, shape = timing.Load(), object(), {"m": 64, "n": 64, "k": 64}
    load.begin()
    load.end(kernel, shape, [0.5, 0.25])
    load.begin()
    assert load.launched(kernel, shape) == [0.5, 0.25]
    assert load.launched(object(), shape) == [] and load.launched(kernel, {**shape, "k": 32}) == []
    load.end()  # a timed point's work
    load.begin()
    assert load.launched(kernel, shape) == []
    load.end(kernel, shape, [0.5])
    load.last -= 2 * timing.Load.IDLE_GAP_S  # as if the device had been idle since
    load.begin()
    assert load.launched(kernel, shape) == []

    class Host:
        BATCHES_SHORT_KERNELS = False
        calls = 0

        def host_time(self, run):
            self.calls += 1
            return 0.125

    host = Host()
    assert timing.warm_up(host, None, 2, 0.0, launched=[0.5, 0.25]) == [0.5, 0.25] and host.calls == 0
    assert timing.warm_up(host, None, 3, 0.0, launched=[0.5]) == [0.5, 0.125, 0.125] and host.calls == 2

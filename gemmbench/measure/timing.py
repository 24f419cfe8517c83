"""Sampling until the median is stable: the statistics are pure, the clock comes from the backend."""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

AUDIT_LAUNCHES = 64  # launches each point tests at least, after its sampling, where the time allows
AUDIT_MAX_S = 0.5  # and the audit takes at most this long, and no longer than the sampling did
BEHIND_SAMPLES = 3  # a trial's samples before it may stop behind: its fastest of them, not one that met a dip
BEHIND_SPAN_S = 0.3  # or fewer, where they span this much device time: a dip (a tenth of a second) is a small part


def median_ci_rel(samples, resolution_s: float = 0.0) -> float:
    """95% confidence half-width of the median relative to the median (McGill et al.: 1.57 IQR / sqrt(n)), and
    never below half the timer's step: samples quantised to one value do not pin the median closer than that.
    The step is the smallest gap between distinct samples, or `resolution_s` (the timer's nominal one) without two."""
    x = np.asarray(samples, dtype=float)
    if len(x) < 2:
        return math.inf
    q25, median, q75 = np.percentile(x, [25, 50, 75])
    if median <= 0:
        return math.inf
    gaps = np.diff(np.unique(x))
    step = float(gaps.min()) if len(gaps) else resolution_s
    return float(max(1.57 * (q75 - q25) / math.sqrt(len(x)), step / 2) / median)


@dataclass
class Sampler:
    """Collects samples until the median is stable (relative CI under rel_precision, from at least min_samples)
    and the samples add up to min_time_s, or until max_samples or the budget ends it.

    As in nvbench, min_time_s of device time is asked for even once the median is stable: a power-capped GPU's
    clock moves over tens of milliseconds, so short windows disagree. It also dips for a tenth of a second or more
    about once a second (reports/examples/h200-power-cap), which moves the median of a window much shorter than
    that by several percent: while `slowed()` says the device is held down by power or heat, neither precision nor
    max_samples ends the sampling before it spans capped_span_s of wall time (the budget still does).
    A search's trial stops after BEHIND_SAMPLES (fewer for a kernel of seconds: `behind_samples`) where even its
    fastest sample is over `behind_s` (a multiple of the fastest median timed at its shape so far): it cannot be the
    pick, and the rest of its samples would only pin how far behind it is. `converged` says only whether the
    precision target was met; `stopped_by` says what ended the sampling.
    """

    min_samples: int
    max_samples: int
    rel_precision: float
    budget_s: float
    min_time_s: float = 0.0
    resolution_s: float = 0.0  # the timer's nominal step (see median_ci_rel)
    short_s: float = 0.0  # a median under this after min_samples ends it ("short": batched samples time it instead)
    capped_span_s: float = 0.0
    slowed: Callable[[], bool] | None = None  # whether the device is held down by power or heat now
    behind_s: float = 0.0  # a trial's fastest sample over this after behind_samples ends it ("behind"); 0: never
    device_s: list = field(default_factory=list)
    started: float = field(default_factory=lambda: time.perf_counter())

    def add(self, device_s: float) -> None:
        self.device_s.append(device_s)

    @property
    def converged(self) -> bool:
        return bool(len(self.device_s) >= self.min_samples
                    and median_ci_rel(self.device_s, self.resolution_s) <= self.rel_precision)

    @property
    def spanning_a_cap(self) -> bool:
        """Whether the device is held down by power or heat and the window is still shorter than capped_span_s: a
        power cap's dip must fall inside the window, not decide its median (see the class)."""
        return bool(self.capped_span_s and self.slowed and self.slowed()
                    and time.perf_counter() - self.started < self.capped_span_s)

    @property
    def stopped_by(self) -> str | None:
        """What ends the sampling now: "behind" (see the class), "precision" (stable for min_time_s), "short" (a
        median under short_s), "max_samples", "budget", or None."""
        n = len(self.device_s)
        # a sample under short_s times the launch's gap beside it (sample_batched): not yet a fair comparison
        if self.behind_s and n and n >= behind_samples(sum(self.device_s) / n) and \
                min(self.device_s) > max(self.behind_s, self.short_s):
            return "behind"
        if self.short_s and n >= self.min_samples and np.median(self.device_s) < self.short_s:
            return "short"
        if not self.spanning_a_cap:
            if self.converged and sum(self.device_s) >= self.min_time_s:
                return "precision"
            if n >= self.max_samples:
                return "max_samples"
        # Like nvbench's timeout, the budget also cuts min_samples short for a kernel that takes seconds per
        # call, but a median needs a few samples.
        if n >= min(self.min_samples, 3) and time.perf_counter() - self.started > self.budget_s:
            return "budget"
        return None

    @property
    def done(self) -> bool:
        return self.stopped_by is not None

    def summary(self) -> dict:
        device = np.asarray(self.device_s)
        return {
            "median_s": float(np.median(device)),
            "min_s": float(device.min()),
            "samples": len(device),
            "median_ci_rel": median_ci_rel(device, self.resolution_s),
            "converged": self.converged,
            "stopped_by": self.stopped_by or "budget",
            "thin_median": len(device) < self.min_samples and self.stopped_by != "behind",  # cut short by the budget
        }


def behind_samples(sample_s: float) -> int:
    """The samples a trial takes before it may stop behind, its samples each about `sample_s` long: BEHIND_SAMPLES,
    or as few as span BEHIND_SPAN_S (one of a kernel that takes seconds)."""
    return max(1, min(BEHIND_SAMPLES, math.ceil(BEHIND_SPAN_S / sample_s))) if sample_s > 0 else BEHIND_SAMPLES


def warm_up(backend, run, runs: int, seconds: float = 0.0, busy_since: float | None = None,
            launched: list[float] = ()) -> list[float]:
    """Launches before sampling, each synchronised and timed on the host (the host time per call, launch and
    synchronisation included): JIT, module load and handles settle, and the device has been busy for `seconds` so
    that clocks reach their steady state under load (a power-capped GPU slows down within a second).
    `busy_since`: when the device's current stretch of work began (time.perf_counter), where a worker kept it busy
    before this point (Load.begin, read before the first launch: a measured point's validation has just compiled and
    loaded the kernel, so that launch is the device's work); the seconds count from there, else from the first launch.
    A kernel under BATCH_TARGET_S, on a backend that batches such kernels, spends no seconds: launches synchronised
    one by one leave its device idle most of the time (see settle), a load under which no clock moves.
    `launched`: the host times of this kernel's launches at this shape just before, in this stretch (its
    validation's, Load.launched): they count as the first of the `runs`, as they paid the one-time costs and kept the
    device busy (a kernel that takes a second launches no more).
    Returns the host time of each launch, `launched` first."""
    start = time.perf_counter() if busy_since is None else busy_since
    host_s = list(launched) or [backend.host_time(run)]
    while len(host_s) < runs:
        host_s.append(backend.host_time(run))
    if not _idling(backend, host_s):  # decided once: the loop below keeps the device as busy as it can
        while time.perf_counter() - start < seconds:
            host_s.append(backend.host_time(run))
    return host_s


def _idling(backend, host_s: list) -> bool:
    """Whether launches as short as these (the first aside: one-time costs), one at a time, leave the device idle."""
    return backend.BATCHES_SHORT_KERNELS and float(np.median(host_s[1:] or host_s)) < BATCH_TARGET_S


BATCH_TARGET_S = 100e-6  # a batched sample spans at least this much device time
SETTLE_WINDOW_S = 0.1  # launches watched per settling window
SETTLE_MAX_S = 5.0  # a clock that keeps moving for this long is sampled as it is (the window's clocks are reported)
SETTLE_CLOCK_REL = 0.01  # two windows whose mean SM clocks are this close: the clock has settled


def settle(backend, run, before=None, host_s: float | None = None, spans_caps: bool = False) -> float:
    """Warm-up continued while the device is still slowing down under this kernel's own load. A power-capped GPU
    lowers its clock over a second or more once a heavier kernel starts, so samples taken meanwhile depend on what
    ran before (the last point's kernel). Windows of SETTLE_WINDOW_S of launches, each watched, until one shows no
    power or thermal slowdown, or its mean SM clock is within SETTLE_CLOCK_REL of the window before, or SETTLE_MAX_S
    has passed. `before`: the watch over this kernel's launches just before (the warm-up), which counts as the
    first window where it spans SETTLE_WINDOW_S (a long kernel's warm-up does: nothing more to launch where it saw no
    slowdown). `spans_caps`: the sampling goes on for a span of wall time once it sees a slowdown (Sampler's
    capped_span_s), so a warm-up of any length that saw none needs no window to confirm it: a slowdown that begins
    later is sampled across, where a confirming window, one per point, mostly finds none. `host_s`: a launch's host
    time (the warm-up's median); under BATCH_TARGET_S, launches synchronised one by one leave the device idle much of
    each window (a Python launch and its synchronisation take tens of µs), a load under which nothing settles: no
    window (the sampling window's clocks say whether it was throttled).
    Returns the seconds spent (0 without telemetry: a CPU)."""
    if not backend.telemetry() or (host_s is not None and host_s < BATCH_TARGET_S):
        return 0.0
    start, previous = time.perf_counter(), None
    spanned = before is not None and before.seconds >= SETTLE_WINDOW_S
    if before is not None and (spanned or spans_caps):
        clocks = before.summary()
        if not clocks.get("slowdown"):
            return 0.0
        previous = clocks["sm_clock_mean_mhz"] if spanned else None
    while True:
        with backend.watch() as window:
            began = time.perf_counter()
            while time.perf_counter() - began < SETTLE_WINDOW_S:
                backend.host_time(run)
        clocks = window.summary()
        spent = time.perf_counter() - start
        if not clocks.get("slowdown") or spent >= SETTLE_MAX_S or (
                previous and abs(clocks["sm_clock_mean_mhz"] - previous) <= SETTLE_CLOCK_REL * previous):
            return spent
        previous = clocks["sm_clock_mean_mhz"]


def _sampler(timing: dict, resolution_s: float, slowed=None, behind_s: float = 0.0) -> Sampler:
    return Sampler(timing["min_samples"], timing["max_samples"], timing["rel_precision"], timing["budget_s"],
                   timing["min_time_s"], resolution_s, capped_span_s=timing.get("capped_span_s", 0.0),
                   slowed=slowed, behind_s=behind_s)


def sample(backend, run, timing: dict, cache: str, before=None, after=None, short_s: float = 0.0,
           sampler: Sampler | None = None, slowed=None, behind_s: float = 0.0) -> Sampler:
    """Device time per call (launch overhead excluded) until the median is stable; `before()` and `after()`, if
    given, are called around each sample, outside the timed region. `short_s`: stop after min_samples where the
    median is under it (sample_batched times such a kernel). `sampler`: one to go on with. `slowed`, `behind_s`: see
    Sampler."""
    sampler = sampler or _sampler(timing, backend.TIMER_RESOLUTION_S, slowed, behind_s)
    sampler.short_s = short_s
    while not sampler.done:
        if before:
            before()
        if cache == "cold":
            backend.flush_cache()
        sampler.add(backend.device_time(run))
        if after:
            after()
    return sampler


def short_s(backend, cache: str) -> float:
    """Where one-launch samples hand a kernel over to batched ones (sample_batched), whose median is then the
    point's: under BATCH_TARGET_S per launch, on a backend whose timer needs it (BATCHES_SHORT_KERNELS), hot cache
    only (a batch's launches after the first would run hot). 0: never."""
    return BATCH_TARGET_S if backend.BATCHES_SHORT_KERNELS and cache == "hot" else 0.0


def sample_batched(backend, per_launch_s: float, timing: dict, cache: str, prepare,
                   slowed=None, behind_s: float = 0.0) -> tuple[int, Sampler | None]:
    """For a kernel shorter than BATCH_TARGET_S, per-launch times from samples of several launches queued between
    one pair of events (enough to span BATCH_TARGET_S): one launch per event pair also times the gap the events and
    the launch leave on the device. `prepare(launches)` gives (launches it can hold, the launch to repeat, and the
    calls before and after each batch, outside the timed region). Returns (launches per sample, the sampler of
    per-launch times), or (1, None) for a kernel long enough already, and with a cold cache (the launches after a
    batch's first would run hot)."""
    launches = math.ceil(BATCH_TARGET_S / per_launch_s) if per_launch_s > 0 else 1
    if launches <= 1 or cache == "cold":
        return 1, None
    launches, run, before, after = prepare(launches)
    if launches <= 1:
        return 1, None
    sampler = _sampler(timing, backend.TIMER_RESOLUTION_S / launches, slowed, behind_s)
    while not sampler.done:
        before()
        sampler.add(backend.device_time(run, launches) / launches)
        after()
    return launches, sampler


class Load:
    """When this worker's current stretch of device work began: points run back to back keep the device busy, so
    the warm-up's seconds (clocks settling under load) are spent once per stretch, not once per point."""

    IDLE_GAP_S = 0.25  # a pause longer than this between points (a compile, a wait) starts a new stretch

    def __init__(self):
        self.since = self.last = None
        self.settled: set = set()  # the shapes a point settled the clocks at in this stretch
        self.just_launched: tuple | None = None  # (kernel, shape, host times): the last work of the stretch

    def begin(self) -> float:
        now = time.perf_counter()
        if self.last is None or now - self.last > self.IDLE_GAP_S:
            self.since, self.settled, self.just_launched = now, set(), None
        return self.since

    @staticmethod
    def _shape(sizes: dict) -> tuple:
        return tuple(sorted(sizes.items()))

    def launched(self, kernel, sizes: dict) -> list[float]:
        """The host times of the launches of `kernel` at the shape `sizes` that ended the stretch's last work (a
        point's validation, right before the point is timed), or none where other work came after them or the
        stretch began anew; read after begin()."""
        kept = self.just_launched
        return list(kept[2]) if kept and kept[0] is kernel and kept[1] == self._shape(sizes) else []

    def first_at(self, sizes: dict) -> bool:
        """Whether no point settled the clocks at this shape in the current stretch (and, from now on, one has):
        a search's candidates run back to back at one shape, each under much the same load."""
        shape = self._shape(sizes)
        first = shape not in self.settled
        self.settled.add(shape)
        return first

    def end(self, kernel=None, sizes: dict | None = None, host_s: list[float] = ()) -> None:
        """The stretch's work so far is done; `host_s`: it ended with these launches of `kernel` at the shape
        `sizes`."""
        self.last = time.perf_counter()
        self.just_launched = (kernel, self._shape(sizes), list(host_s)) if host_s else None


LOAD = Load()  # this process's stretch of device work

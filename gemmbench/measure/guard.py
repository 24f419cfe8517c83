"""What a variant could change in the measuring process to move its work out of the timed region, or to reach the
variant measured after it: tracing and profiling hooks (a hook runs code when the timer's stop returns), the
interpreter's switch interval, the timer itself, and threads (one that finishes after the stop, or one left running
that slows the next variant)."""
from __future__ import annotations

import os
import sys
import threading
import time

SWITCH_INTERVAL = sys.getswitchinterval()  # the process's own, read before any variant ran
PERF_COUNTER = time.perf_counter


def _hooks() -> dict:
    thread_trace = threading.gettrace() if hasattr(threading, "gettrace") else threading._trace_hook
    thread_profile = threading.getprofile() if hasattr(threading, "getprofile") else threading._profile_hook
    monitoring = getattr(sys, "monitoring", None)
    tools = [monitoring.get_tool(i) for i in range(6)] if monitoring else []
    return {"a tracing hook (sys.settrace)": sys.gettrace(), "a profiling hook (sys.setprofile)": sys.getprofile(),
            "a tracing hook for new threads": thread_trace, "a profiling hook for new threads": thread_profile,
            "a sys.monitoring tool": next((tool for tool in tools if tool), None)}


def native_threads() -> frozenset:
    """The process's threads as the kernel lists them (Python's and native ones: BLAS pools, runtimes)."""
    try:
        return frozenset(os.listdir("/proc/self/task"))
    except OSError:
        return frozenset(str(t.native_id) for t in threading.enumerate())


def busy_threads(among: frozenset, window_s: float = 0.1) -> list[str]:
    """Which of the threads `among` (native ids) used the CPU during `window_s` (idle pools do not)."""
    if not among:  # nothing to watch: no window to wait
        return []
    def ticks():
        found = {}
        for tid in among:
            try:
                fields = open(f"/proc/self/task/{tid}/stat").read().rsplit(")", 1)[1].split()
                found[tid] = int(fields[11]) + int(fields[12])  # utime, stime
            except (OSError, IndexError, ValueError):
                pass
        return found
    before = ticks()
    time.sleep(window_s)
    after = ticks()
    return sorted(tid for tid in after if after[tid] > before.get(tid, after[tid]))


def python_threads() -> frozenset:
    return frozenset(t for t in threading.enumerate() if t.is_alive())


def tampering() -> str | None:
    """What is set in this process that no measurement may run under, or None."""
    installed = [what for what, hook in _hooks().items() if hook is not None]
    if installed:
        return f"{installed[0]} is installed"
    if sys.getswitchinterval() != SWITCH_INTERVAL:
        return f"the interpreter's switch interval was changed ({SWITCH_INTERVAL:g} s to {sys.getswitchinterval():g} s)"
    if time.perf_counter is not PERF_COUNTER:
        return "time.perf_counter was replaced"
    return None


class Guard:
    """The process as a sample's timing found it: `changed()` says what differs now (or None)."""

    def __init__(self):
        self.threads = native_threads()

    def changed(self) -> str | None:
        found = tampering()
        if found:
            return found
        new = native_threads() - self.threads
        return f"{len(new)} new thread(s) appeared" if new else None


def left_behind(before: frozenset) -> list[str]:
    """Python threads running now that were not at `before` (python_threads()): a variant's, left to run on."""
    return sorted(t.name for t in python_threads() - before)

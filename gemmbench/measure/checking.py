"""Pass or fail for one point: every output written, errors within the mode's tolerance; and whether a timing is
physically possible on the device it was measured on."""
from __future__ import annotations

# An element's error may reach this many tolerances of its own scale (the root-sum-square of its products). fp32's
# rounding stays far below it; TF32's input rounding reaches about one tolerance at the largest of 2**28 elements;
# one product term dropped from an element exceeds it unless that term is tiny.
ELEMENT_FACTOR = 3


def verdict(errors: dict, tolerance: float, size: int) -> tuple[str, str]:
    if errors.get("outside_writes"):
        return "failed", f"{errors['outside_writes']} elements written outside the output (its guard bands)"
    if errors["unwritten"]:
        return "failed", f"{errors['unwritten']} of {size} outputs are NaN (never written, or computed as NaN)"
    if errors["nonfinite"]:
        return "failed", f"{errors['nonfinite']} of {size} outputs are infinite"
    rel, scaled = errors["rel_error"], errors["max_scaled_error"]
    if rel > tolerance:
        return "failed", f"relative error {rel:.3g} exceeds the tolerance {tolerance:.3g}"
    if scaled > ELEMENT_FACTOR * tolerance:
        return "failed", (f"an element's error is {scaled:.3g} of the root-sum-square of its products, above "
                          f"{ELEMENT_FACTOR} x tolerance ({ELEMENT_FACTOR * tolerance:.3g})")
    return "ok", f"relative error {rel:.3g} within {tolerance:.3g}"


PEAK_SLACK = 1.02  # rounding in the peak (SM count x max clock x rate) and in the timer; above it is not a measurement
BANDWIDTH_SLACK = 1.25  # the measured copy bandwidth is a little under the memory's datasheet peak


TIME_NAMES = {"median_s": "median", "min_s": "fastest sample", "batched_median_s": "batched median",
              "batched_min_s": "fastest batched sample"}


def implausible(flops: float, min_bytes: float, seconds: float, device: dict, mode: str, cache: str) -> str | None:
    """Why a timing cannot be true of `device` (its facts: peak per mode at the max clock, measured copy bandwidth,
    L2 size), or None: faster than the peak, or, for a GPU whose operands cannot sit in its L2 (cold cache, or twice
    the L2), more bytes per second than its memory moves. Such a time missed part of the work."""
    tflops = flops / seconds / 1e12
    peak = (device.get("peak_tflops") or {}).get(mode)
    if peak and tflops > PEAK_SLACK * peak:
        return (f"{tflops:.3g} TFLOP/s is above the device's {mode} peak of {peak:.3g} TFLOP/s "
                f"({device.get('peak_basis') or 'at its max clock'})")
    bandwidth, l2_bytes = device.get("copy_bandwidth_gbps"), device.get("l2_bytes")
    gbps = min_bytes / seconds / 1e9
    from_memory = device.get("device") == "cuda" and (cache == "cold" or (l2_bytes and min_bytes > 2 * l2_bytes))
    if bandwidth and from_memory and gbps > BANDWIDTH_SLACK * bandwidth:
        return (f"{gbps:.4g} GB/s of operands is above {BANDWIDTH_SLACK:g} x the device's measured copy bandwidth "
                f"({bandwidth:.4g} GB/s)")
    return None


def gate(flops: float, min_bytes: float, times: dict, device: dict, mode: str, cache: str) -> tuple[str | None, str]:
    """Every reported time of a point held to what the device can do: (why one is impossible, or None; the gate's
    state for the row: "checked", or "unchecked: ..." where the device has no known peak for the mode, which is
    said, never passed silently)."""
    for name, seconds in times.items():
        if seconds is not None and seconds > 0:
            why = implausible(flops, min_bytes, seconds, device, mode, cache)
            if why:
                return f"{TIME_NAMES.get(name, name)}: {why}", "checked"
        elif seconds is not None:
            return f"{TIME_NAMES.get(name, name)}: a time of {seconds} s", "checked"
    if not (device.get("peak_tflops") or {}).get(mode):
        return None, f"unchecked: no known {mode} peak for {device.get('gpu') or 'this device'}" + (
            f" ({device['peak_unknown']})" if device.get("peak_unknown") else "")
    return None, "checked"

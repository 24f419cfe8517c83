"""Pass or fail for one point: every output written, its error within the bound of the arithmetic its mode promises;
whether a sample's output is the product of that sample's inputs (Freivalds' test); and whether a timing is physically
possible on the device it was measured on."""
from __future__ import annotations

import math

# The error model. An honest product's error, relative to each element's scale (the root-sum-square of the products
# summed into it, Workload.scale), is about one `unit_error(mode, k)`:
#   - input rounding: fp32 and bf16 operands are used as stored (bf16's reference is the product of the bf16 values),
#     but a product is rounded once in fp32; tf32 rounds each operand to an 11-bit significand first (2 x 2^-11);
#   - accumulation over the reduction length k: fp32's round-to-nearest sums grow as sqrt(k) x 2^-24; tensor cores
#     (tf32, bf16) align addends with few extra bits and truncate, so their error grows linearly, k/8 x 2^-24 (the
#     constant is the H100's, cuBLAS's included, read off validation errors from k = 17 to 16384).
# A point passes when its relative Frobenius error is within RMS_UNITS and every element's scaled error within
# MAX_UNITS of that unit. Honest fp32 products stay within a quarter of either (their rms near 0.3 units at every k,
# up to about 0.65 on outputs of a hundred elements; their worst element near 5 units over 2^28 elements); a TF32
# product is hundreds of fp32 units off, a product composed of BF16 pieces several (up to k of a few hundred: at
# longer reductions fp32's own rounding catches up with it), and a Strassen-type product, which adds rows of unlike
# scale, millions on inputs with rows and columns scaled by 2^±12 (Backend.inputs(scaled=True), every validation's).
UNIT_ROUNDOFF = 2.0 ** -24  # fp32's: every mode accumulates in fp32
INPUT_ROUNDING = {"fp32": 2 * UNIT_ROUNDOFF, "tf32": 2 * 2.0 ** -11, "bf16": 2 * UNIT_ROUNDOFF}
TENSOR_CORE_MODES = ("tf32", "bf16")
RMS_UNITS = 2.6
MAX_UNITS = 24.0


def unit_error(mode: str, k: int) -> float:
    """The honest error of one element of a product in `mode` over a reduction of length `k`, relative to its scale."""
    growth = k / 8 if mode in TENSOR_CORE_MODES else math.sqrt(k)
    return INPUT_ROUNDING[mode] + UNIT_ROUNDOFF * growth


def bound(mode: str, k: int) -> float:
    """The largest relative Frobenius error a point of `mode` and reduction length `k` may have."""
    return RMS_UNITS * unit_error(mode, k)


def verdict(errors: dict, mode: str, k: int, size: int) -> tuple[str, str]:
    if errors.get("outside_writes"):
        return "failed", f"{errors['outside_writes']} elements written outside the output (its guard bands)"
    if errors["unwritten"]:
        return "failed", f"{errors['unwritten']} of {size} outputs are NaN (never written, or computed as NaN)"
    if errors["nonfinite"]:
        return "failed", f"{errors['nonfinite']} of {size} outputs are infinite"
    unit = unit_error(mode, k)
    rel, scaled = errors["rel_error"], errors["max_scaled_error"]
    if rel > RMS_UNITS * unit:
        return "failed", (f"relative error {rel:.3g} is {rel / unit:.3g} times the honest {mode} error at k = {k} "
                          f"({unit:.3g}), above the bound of {RMS_UNITS:g}: not {mode} arithmetic")
    if scaled > MAX_UNITS * unit:
        return "failed", (f"an element's error is {scaled / unit:.3g} times the honest {mode} error of its scale at "
                          f"k = {k}, above the bound of {MAX_UNITS:g} (a term missing or wrong, or rows and columns "
                          f"of unlike scale mixed)")
    return "ok", f"relative error {rel:.3g} ({rel / unit:.2g} honest {mode} units, bound {RMS_UNITS:g})"


def error_units(errors: dict, mode: str, k: int) -> dict:
    """The point's errors as multiples of the honest error of its mode (unit_error), for the tables."""
    unit = unit_error(mode, k)
    return {"error_units": errors["rel_error"] / unit, "max_error_units": errors.get("max_scaled_error", 0.0) / unit}


def projection_verdict(residuals: list, mode: str, k: int) -> str | None:
    """Why the outputs of the timed launches are not the products of their inputs, or None. `residuals`: per
    launch, (the largest row residual of Freivalds' test over the row's root-sum-square of scales S_i, the projected
    relative error), as a backend's Sets (measure/devices.py) queue them. With x of random signs,
    (C·x − A·(B·x))_i sums row i's errors with random signs, so an honest row stays within a few units of S_i, and
    ‖C·x − A·(B·x)‖ / ‖A·(B·x)‖ estimates the relative error. A product kept from other inputs, work skipped or left
    for later is off by the size of the product itself."""
    unit = unit_error(mode, k)
    for launch, (row, projected) in enumerate(residuals, 1):
        if not (row <= MAX_UNITS * unit and projected <= RMS_UNITS * unit):  # NaN (unwritten) fails both
            unwritten = "; NaN: elements left unwritten" if math.isnan(row) else ""
            return (f"launch {launch} of {len(residuals)}: its output is not the product of its inputs (Freivalds' "
                    f"test on fresh inputs: a row's residual is {row / unit:.3g} honest {mode} units of its scale, "
                    f"bound {MAX_UNITS:g}; projected relative error {projected / unit:.3g} units, bound "
                    f"{RMS_UNITS:g}{unwritten})")
    return None


PEAK_SLACK = 1.02  # rounding in the peak (SM count x max clock x rate) and in the timer; above it is not a measurement
BANDWIDTH_SLACK = 1.25  # the measured copy bandwidth is a little under the memory's datasheet peak


TIME_NAMES = {"median_s": "median", "min_s": "fastest sample", "single_median_s": "one-launch median",
              "single_min_s": "fastest one-launch sample", "batched_median_s": "batched median",
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

"""Pass or fail for one validated point: every output written, errors within the mode's tolerance."""
from __future__ import annotations

MAX_ELEMENT_FACTOR = 10  # max |C - R| may reach this many tolerances, relative to max |R|


def verdict(errors: dict, tolerance: float, size: int) -> tuple[str, str]:
    if errors["unwritten"]:
        return "failed", f"{errors['unwritten']} of {size} outputs are NaN (never written, or computed as NaN)"
    if errors["nonfinite"]:
        return "failed", f"{errors['nonfinite']} of {size} outputs are infinite"
    rel, max_abs, max_ref = errors["rel_error"], errors["max_abs_error"], errors["max_abs_reference"]
    if rel > tolerance:
        return "failed", f"relative error {rel:.3g} exceeds the tolerance {tolerance:.3g}"
    if max_abs > MAX_ELEMENT_FACTOR * tolerance * max_ref:
        return "failed", (f"max element error {max_abs:.3g} exceeds {MAX_ELEMENT_FACTOR} x tolerance x max|R| "
                          f"({MAX_ELEMENT_FACTOR * tolerance * max_ref:.3g})")
    return "ok", f"relative error {rel:.3g} within {tolerance:.3g}"

"""Checks shared by the tiled kernel ladders: why a tile parameter set cannot compile or run."""
from __future__ import annotations


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def divides(params, *pairs) -> str | None:
    for small, big in pairs:
        if params[big] % params[small]:
            return f"{small}={params[small]} must divide {big}={params[big]}"
    return None


def static_smem(floats: int) -> str | None:
    return None if floats * 4 <= 48 * 1024 else f"{floats * 4} bytes of static shared memory (48 KiB at most)"


def accumulators(count: int) -> str | None:
    return None if count <= 128 else "more than 128 accumulators per thread would spill"

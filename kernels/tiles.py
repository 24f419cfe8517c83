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


def block_threads(threads: int) -> str | None:
    return None if 32 <= threads <= 1024 and threads % 32 == 0 else \
        f"{threads} threads per block (needs a multiple of 32 up to 1024)"


def registers(threads: int, need: int, min_blocks: int = 1) -> str | None:
    """Why `need` registers a thread do not fit `min_blocks` blocks of `threads` on an SM (65536 registers)."""
    budget = min(255, 65536 // (threads * min_blocks))
    return None if need <= budget else f"about {need} registers a thread, {budget} left by {min_blocks} block(s) per SM"


def warp_threads(p) -> int:
    """Threads of a block of (BM/WM)×(BN/WN) warps."""
    return (p["BM"] // p["WM"]) * (p["BN"] // p["WN"]) * 32


def warp_tiles(p) -> str | None:
    """Block → warp → WMITER×WNITER sub-tiles → one TM×TN tile per thread: the shapes must nest exactly."""
    bad = divides(p, ("WM", "BM"), ("WN", "BN"), ("WMITER", "WM"), ("WNITER", "WN"))
    if bad:
        return bad
    sub_m, sub_n = p["WM"] // p["WMITER"], p["WN"] // p["WNITER"]
    if sub_m % p["TM"] or sub_n % p["TN"] or (sub_m // p["TM"]) * (sub_n // p["TN"]) != 32:
        return f"a {sub_m}x{sub_n} warp sub-tile must hold exactly 32 thread tiles of {p['TM']}x{p['TN']}"
    return accumulators(p["WMITER"] * p["TM"] * p["WNITER"] * p["TN"])

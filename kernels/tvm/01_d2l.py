"""The "Dive into Deep Learning" GPU matmul schedule (d2l.ai, chapter "Matrix Multiplication" on GPUs).

A block of BLOCK×BLOCK threads computes a (BLOCK·TX)×(BLOCK·TY) tile of C, each thread a contiguous TX×TY tile
accumulated in registers; k advances TK at a time, the block's threads fetching the A and B slices into shared
memory together, and each thread reading its slice of them into registers before its outer products.
Written for TVM's TensorIR schedule (the original used the TE schedule API that TVM 0.27 no longer has).
"""
from __future__ import annotations

from typing import Mapping

from kernels.tiles import accumulators, block_threads, static_smem

DEFAULTS = {"block_size": 16, "tx": 8, "ty": 4, "tk": 32}
SPACE = {"block_size": (8, 16), "tx": (4, 8), "ty": (4, 8), "tk": (8, 16, 32)}
DESCRIPTION = "d2l.ai schedule: shared then register caches of A and B, TX×TY outputs per thread"


def check(p: Mapping) -> str | None:
    return (block_threads(p["block_size"] ** 2)
            or static_smem(p["tk"] * p["block_size"] * (p["tx"] + p["ty"]))
            or accumulators(p["tx"] * p["ty"]))


def schedule(func, p: Mapping, target, bind: bool = True):
    """The scheduled matmul PrimFunc `func` (block "C"). `bind=False` leaves the block/thread loops serial: the
    same loop nest, which a CPU can run, so the tiling, padding and caching can be checked on the llvm target."""
    from tvm import s_tir

    sch = s_tir.Schedule(func)
    bs, tx, ty, tk = p["block_size"], p["tx"], p["ty"], p["tk"]
    block = sch.get_sblock("C")
    # Any shape: pad the iteration space to whole tiles; the padding blocks are inlined into the caches below,
    # which leaves bounds checks on the global reads and writes only.
    sch.pad_einsum(block, [bs * tx, bs * ty, tk])

    i, j, k = sch.get_loops(block)
    ib, it, ii = sch.split(i, [None, bs, tx])
    jb, jt, ji = sch.split(j, [None, bs, ty])
    ko, ki = sch.split(k, [None, tk])
    sch.reorder(ib, jb, it, jt, ko, ki, ii, ji)
    _bind(sch, bind, (jb, "blockIdx.x"), (ib, "blockIdx.y"), (jt, "threadIdx.x"), (it, "threadIdx.y"))

    c_local = sch.cache_write(block, 0, "local")
    sch.reverse_compute_at(c_local, jt)
    for padded in sch.get_consumers(c_local):  # none where the shape is whole tiles
        sch.reverse_compute_inline(padded)

    for operand in (0, 1):
        shared = sch.cache_read(block, operand, "shared")
        sch.compute_at(shared, ko)
        rows, cols = sch.get_loops(shared)[-2:]
        # Every thread of the block fetches a share of the slice (d2l splits each axis into BLOCK parts).
        row_part, _ = sch.split(rows, [bs, None])
        col_part, _ = sch.split(cols, [bs, None])
        _bind(sch, bind, (row_part, "threadIdx.y"), (col_part, "threadIdx.x"))
        for padded in sch.get_producers(shared):
            sch.compute_inline(padded)
        local = sch.cache_read(block, operand, "local")
        sch.compute_at(local, ki)
    sch.decompose_reduction(block, ko)
    return sch


def _bind(sch, bind: bool, *loops_and_tags) -> None:
    for loop, tag in loops_and_tags if bind else ():
        sch.bind(loop, tag)

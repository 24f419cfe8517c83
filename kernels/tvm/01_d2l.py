"""The "Dive into Deep Learning" GPU matmul schedule (d2l.ai, chapter "Matrix Multiplication" on GPUs), as the book
writes it, with the book's parameters: the seed of this project.

A block of BLOCK×BLOCK threads computes a (BLOCK·TX)×(BLOCK·TY) tile of C, each thread a contiguous TX×TY tile
accumulated in registers; k advances TK at a time, the block's threads fetching the A and B slices into shared
memory together, and each thread reading its slice of them into registers before its outer products.
Written for TVM's TensorIR schedule (the original used the TE schedule API that TVM 0.27 no longer has); the one
addition is padding to whole tiles (pad_einsum), a no-op where the shape is whole tiles. Nothing is vectorised:
whether the register caches are read with 128-bit shared loads is up to the CUDA compiler (NVRTC 13.0 reads A with
scalar ones, later versions with LDS.128), so 02_d2l_vectorized.py states it in the schedule.
"""
from __future__ import annotations

from typing import Mapping

from kernels.tiles import accumulators, block_threads, static_smem

DEFAULTS = {"block_size": 16, "tx": 8, "ty": 4, "tk": 32}  # the book's
SPACE: dict = {}  # the book's parameters, not searched (02_d2l_vectorized.py is tuned)
DESCRIPTION = "d2l.ai schedule as the book writes it: shared then register caches of A and B, TX×TY outputs per thread"


def check(p: Mapping) -> str | None:
    return (block_threads(p["block_size"] ** 2)
            or static_smem(p["tk"] * p["block_size"] * (p["tx"] + p["ty"]))
            or accumulators(p["tx"] * p["ty"]))


def tiled(func, p: Mapping, k_split: list, bind: bool):
    """The book's tiling of the matmul PrimFunc `func` (block "C"): padded to whole tiles, blocks and threads bound,
    k split by `k_split` ([None, TK] here) under the thread loops, the accumulators cached in registers. Returns the
    schedule, the block and the k loops. `bind=False` leaves the block/thread loops serial: the same loop nest,
    which a CPU can run, so the tiling, padding and caching can be checked on the llvm target."""
    from tvm import s_tir

    sch = s_tir.Schedule(func)
    bs, tx, ty = p["block_size"], p["tx"], p["ty"]
    block = sch.get_sblock("C")
    # Any shape: pad the iteration space to whole tiles; the padding blocks are inlined into the caches below,
    # which leaves bounds checks on the global reads and writes only.
    sch.pad_einsum(block, [bs * tx, bs * ty, p["tk"]])

    i, j, k = sch.get_loops(block)
    ib, it, ii = sch.split(i, [None, bs, tx])
    jb, jt, ji = sch.split(j, [None, bs, ty])
    k_loops = sch.split(k, k_split)
    sch.reorder(ib, jb, it, jt, *k_loops, ii, ji)
    bind_loops(sch, bind, (jb, "blockIdx.x"), (ib, "blockIdx.y"), (jt, "threadIdx.x"), (it, "threadIdx.y"))

    c_local = sch.cache_write(block, 0, "local")
    sch.reverse_compute_at(c_local, jt)
    for padded in sch.get_consumers(c_local):  # none where the shape is whole tiles
        sch.reverse_compute_inline(padded)
    return sch, block, k_loops


def shared_cache(sch, block, operand: int, at):
    """The operand's shared-memory slice, filled at loop `at`, with the padding (if any) inlined into its fetch.
    Returns the cache block and whether the shape needed padding."""
    shared = sch.cache_read(block, operand, "shared")
    sch.compute_at(shared, at)
    padded = sch.get_producers(shared)
    for pad in padded:
        sch.compute_inline(pad)
    return shared, bool(padded)


def fetch_by_rows_and_columns(sch, shared, p: Mapping, bind: bool) -> None:
    """The book's cooperative fetch: every thread of the block copies a share of the slice, each axis split into
    BLOCK parts."""
    rows, cols = sch.get_loops(shared)[-2:]
    row_part, _ = sch.split(rows, [p["block_size"], None])
    col_part, _ = sch.split(cols, [p["block_size"], None])
    bind_loops(sch, bind, (row_part, "threadIdx.y"), (col_part, "threadIdx.x"))


def schedule(func, p: Mapping, target, bind: bool = True):
    """The scheduled matmul PrimFunc `func` (block "C")."""
    sch, block, (ko, ki) = tiled(func, p, [None, p["tk"]], bind)
    for operand in (0, 1):
        shared, _ = shared_cache(sch, block, operand, ko)
        fetch_by_rows_and_columns(sch, shared, p, bind)
        sch.compute_at(sch.cache_read(block, operand, "local"), ki)
    sch.decompose_reduction(block, ko)
    return sch


def bind_loops(sch, bind: bool, *loops_and_tags) -> None:
    for loop, tag in loops_and_tags if bind else ():
        sch.bind(loop, tag)

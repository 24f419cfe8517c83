"""The CuPy ladder's best FP32 recipe (kernels/cupy/12_async_transpose.cu) written as a TensorIR schedule: how close
TVM's schedule language gets when it is told the recipe, piece by piece.

- Block tile BM×BN×BK (256×128×8), warps of WM×WN, each warp WMITER×WNITER sub-tiles of 32 thread tiles TM×TN: a
  thread holds (WMITER·TM)×(WNITER·TN) accumulators (8×16), as rung 12 does.
- A is copied into shared memory transposed (As[k][m]) by 4-byte cp.async, one element per copy, lanes along k; B as
  it is, by 16-byte cp.async (4-byte ones where B's rows are not whole float4s). STAGES k-tiles in flight
  (software_pipeline_stage on the k-tile loop, lowered to cp.async with `tirx.use_async_copy`).
- TVM's storage rewrite is off for this schedule (`pass_config`): it retypes a buffer whose every access is a float4
  as a float4 array, and the cp.async injection then refuses B's 16-byte copies. B copied by 4-byte cp.async instead
  cost the rung several points of cuBLAS (reports/examples/h200-tvm-recipe).
- TensorIR caches rectangles of a buffer, and a thread's rows (columns) are WMITER (WNITER) runs of TM (TN) with a
  sub-tile between them. So the shared tiles are laid out with the sub-tile index outermost (As[k][wm][wy][r]): a
  thread's fragment of a k-step is then a rectangle, read as float4s (LDS.128). A's k rows are padded by 4 floats
  (storage_align), so that a warp's transposing stores land in 32 banks, as rung 12's row stride BM + 4 does.
- The fragments are double-buffered in registers: the k-step loop is a software pipeline of its own (fragment reads
  one k-step ahead of the FFMAs). Unlike rung 12, the first fragments of a k-tile are not read during the previous
  tile's last k-step: TVM pipelines each k-tile's k-steps apart.
- The FFMAs of a k-step run column by column (one value of B meets the thread's values of A in turn), as rung 12's.
- Blocks in groups of GROUP block rows (rung 12's grouped order), as far as the grid's rows divide into groups.
- The output tile is written from registers with float4 stores where the shape is whole tiles.
Any shape is padded to whole block tiles (pad_einsum) and the padding inlined into the copies and the write-back.
"""
from __future__ import annotations

import math
from typing import Mapping

from kernels.tiles import block_threads, divides, static_smem, warp_threads, warp_tiles

VECTOR = 4  # floats per 128-bit access
A_PAD = 4  # floats after each k row of the transposed A tile: a warp's 4-byte stores then hit 32 banks
DEFAULTS = {"BM": 256, "BN": 128, "BK": 8, "WM": 64, "WN": 64, "WMITER": 2, "WNITER": 2, "TM": 4, "TN": 8,
            "STAGES": 3, "GROUP": 8}  # rung 12's
# What TVM's static shared memory (48 KiB) leaves of rung 12's space around cuBLAS's tile: the block's rows, the k
# step, the stages in flight and the grouping of block rows.
SPACE = {"BM": (128, 256), "BK": (8, 16), "STAGES": (2, 3), "GROUP": (4, 8, 16)}
DESCRIPTION = ("rung 12's recipe as a TensorIR schedule: A transposed by 4-byte cp.async, B by 16-byte ones, "
               "pipelined k-tiles, float4 fragments double-buffered in registers, 8×16 outputs per thread; tiles "
               "tuned")


def shared_floats(p: Mapping) -> int:
    return p["STAGES"] * p["BK"] * (p["BM"] + A_PAD + p["BN"])


def pass_config(p: Mapping) -> dict:
    """TVM's lowering options for this schedule, beside the family's (variants.PASS_CONFIG)."""
    return {"tirx.disable_storage_rewrite": True}


def check(p: Mapping) -> str | None:
    threads = warp_threads(p)
    return (warp_tiles(p) or block_threads(threads) or static_smem(shared_floats(p))
            or divides({**p, "V": VECTOR}, ("V", "TM"), ("V", "TN"))
            or (None if (p["BM"] * p["BK"]) % threads == 0 and (p["BK"] * p["BN"]) % (threads * VECTOR) == 0 else
                f"the {p['BM']}×{p['BK']} and {p['BK']}×{p['BN']} tiles do not split evenly over {threads} threads"))


def schedule(func, p: Mapping, target, bind: bool = True):
    """The scheduled matmul PrimFunc `func` (block "C")."""
    from tvm import s_tir

    if not bind:
        raise ValueError("the recipe's copies are GPU copies (cp.async): no unbound form")
    sch = s_tir.Schedule(func)
    block = sch.get_sblock("C")
    sch.pad_einsum(block, [p["BM"], p["BN"], p["BK"]])
    padded = [int(sch.get(loop).extent) for loop in sch.get_loops(block)]  # m, n, k in whole tiles
    group = math.gcd(padded[0] // p["BM"], p["GROUP"])  # whole groups of block rows only
    # The block's iteration space in the recipe's coordinates (RECIPE_AXES, its loops in that order); every cache
    # below is indexed by these variables (reindex_cache_*), so that TVM derives each one's region exactly.
    sch.transform_block_layout(block, recipe_coordinates(p, group))
    ig, jb, ii, wy, wx, ly, lx, k, wn, tn, wm, tm = sch.get_loops(block)
    extents = recipe_extents(p, group, *padded)

    def axes(names: str):  # an index map from the block's variables to those `names` lists, in its order
        return index_map_to(*(name for name in names.split() if extents[name] > 1))  # TVM drops those of one
    ko, ki = sch.split(k, [None, p["BK"]])

    c_local = sch.reindex_cache_write(block, 0, "local", axes("ig jb ii wy wx ly lx wm tm wn tn"))
    # Under the thread loops before they are fused (the padding's write-back keeps its bounds only so), and they
    # are bound before the shared caches come (whose regions then span the block's threads).
    sch.reverse_compute_at(c_local, lx)
    padded_c = sch.get_consumers(c_local)
    for pad in padded_c:
        sch.reverse_compute_inline(pad)
    sch.bind(sch.fuse(ig, jb, ii), "blockIdx.x")
    sch.bind(sch.fuse(wy, wx, ly, lx), "threadIdx.x")
    if not padded_c:  # whole tiles: float4 stores along n
        c_wn, c_tn, c_wm, c_tm = sch.get_loops(c_local)[-4:]
        sch.reorder(c_wm, c_tm, c_wn, c_tn)
        sch.vectorize(sch.split(c_tn, [None, VECTOR])[1])

    threads = warp_threads(p)
    # Per operand: its shared and register layout (k rows of sub-tile, warp, lane, run), the copy's loops as the
    # cache block has them, and the order the block's threads take them in (A: lanes along k, for transposing
    # stores in 32 banks; B: along n, float4s).
    layouts = {0: ("ig ii k wm wy ly tm", "wy ly k wm tm", "wm wy ly tm k"),
               1: ("jb k wn wx lx tn", "wx lx k wn tn", "k wx wn lx tn")}
    for operand, (layout, loops, copy_order) in layouts.items():
        index_map = axes(layout)
        shared = sch.reindex_cache_read(block, operand, "shared", index_map)
        for pad in sch.get_producers(shared):  # where the shape needed padding
            sch.compute_inline(pad)
        sch.compute_at(shared, ko)
        loops = [name for name in loops.split() if extents[name] > 1]
        copy = dict(zip(loops, sch.get_loops(shared)[-len(loops):]))
        order = [copy[name] for name in copy_order.split() if name in copy]
        sch.reorder(*order)
        fused = sch.fuse(*order)
        if operand == 0:  # one float a copy; the stride of a k row
            kept = [name for name in layout.split() if extents[name] > 1]
            sch.storage_align(shared, 0, axis=kept.index("k"), factor=32, offset=A_PAD)
            sch.bind(sch.split(fused, [None, threads])[1], "threadIdx.x")
        else:  # float4s along n (TVM copies them one float at a time where a row's bounds cut a float4)
            _, thread, vector = sch.split(fused, [None, threads, VECTOR])
            sch.bind(thread, "threadIdx.x")
            sch.vectorize(vector)
        local = sch.reindex_cache_read(block, operand, "local", index_map)
        sch.compute_at(local, ki)
        sch.vectorize(sch.split(sch.get_loops(local)[-1], [None, VECTOR])[1])

    # The k-step loop's pipeline (fragments one step ahead of the FFMAs) is injected first: the k-tile loop then
    # holds the two copies, that pipeline's prologue, its loop and its epilogue; the copies run STAGES - 1 tiles
    # ahead, asynchronously.
    sch.annotate(ki, "software_pipeline_stage", [0, 0, 1])
    sch.annotate(ki, "software_pipeline_order", [0, 1, 2])
    sch.annotate(ko, "software_pipeline_stage", [0, 0] + [p["STAGES"] - 1] * 3)
    sch.annotate(ko, "software_pipeline_order", [0, 1, 2, 3, 4])
    sch.annotate(ko, "software_pipeline_async_stages", [0])
    for loop in (ki, wn, tn, wm, tm):
        sch.unroll(loop)
    sch.decompose_reduction(block, ko)
    return sch


RECIPE_AXES = "ig jb ii wy wx ly lx k wn tn wm tm"


def index_map_to(*names: str):
    """The index map from the block's variables (RECIPE_AXES) to those named, in that order."""
    from tvm.tirx import IndexMap

    def index_map(*values):
        named = dict(zip(RECIPE_AXES.split(), values))
        return tuple(named[name] for name in names)
    return IndexMap.from_func(index_map, ndim=len(RECIPE_AXES.split()))


def recipe_extents(p: Mapping, group: int, m: int, n: int, k: int) -> dict:
    """The extent of each of RECIPE_AXES for the padded m×n×k."""
    sub_m, sub_n = p["WM"] // p["WMITER"], p["WN"] // p["WNITER"]
    return dict(zip(RECIPE_AXES.split(), (
        m // (p["BM"] * group), n // p["BN"], group, p["BM"] // p["WM"], p["BN"] // p["WN"], sub_m // p["TM"],
        sub_n // p["TN"], k, p["WNITER"], p["TN"], p["WMITER"], p["TM"])))


def recipe_coordinates(p: Mapping, group: int):
    """(i, j, k) as RECIPE_AXES: block group, block column, block row in its group, warp row, warp column, lane
    row, lane column, k, sub-tile column, column in it, sub-tile row, row in it."""
    sub_m, sub_n = p["WM"] // p["WMITER"], p["WN"] // p["WNITER"]

    def index_map(i, j, k):
        return (i // (p["BM"] * group), j // p["BN"], i // p["BM"] % group,
                i // p["WM"] % (p["BM"] // p["WM"]), j // p["WN"] % (p["BN"] // p["WN"]),
                i // p["TM"] % (sub_m // p["TM"]), j // p["TN"] % (sub_n // p["TN"]), k,
                j // sub_n % p["WNITER"], j % p["TN"], i // sub_m % p["WMITER"], i % p["TM"])
    return index_map

"""TVM on the tensor cores: BF16 operands, FP32 accumulators, through TVM's WMMA tensor intrinsics.

TVM 0.27's schedule language reaches the tensor cores by tensorize: a loop nest that matches an intrinsic's
description is replaced by its implementation. Its CUDA intrinsics are nvcuda::wmma (16×16×16 fragments, any dtype)
and mma.sync with ldmatrix (fp16, int8 and fp8 only); wgmma exists only as raw PTX in the TIRx language, not as a
tensor intrinsic. So this rung is WMMA, whose mma_sync compiles to the same HMMA instructions as the CuPy ladder's
tc01–tc03 (the Ampere path), registered here for bfloat16 from TVM's own generators.

The schedule is dlight's MatmulTensorization rule with the recipe's copies:
- Block tile BM×BN×BK of warps WM×WN; a warp holds (WM/16)×(WN/16) accumulator fragments.
- A (BM×BK) and B (BK×BN) are copied into dynamic shared memory by 16-byte cp.async, STAGES k-tiles in flight;
  their rows are padded by 8 bf16 (storage_align) so that the fragment loads spread over the banks.
- Each k-step's fragments are loaded one step ahead of the mma_syncs (a nested software pipeline).
- Blocks in groups of GROUP block rows (the CuPy ladder's grouped order, for L2 reuse), as far as the grid's rows
  divide into groups.
- The accumulators go to shared memory by wmma::store_matrix_sync, then to global memory as float4s (whole tiles)
  or element by element under the padding's bounds.
Any shape is padded to whole block tiles (pad_einsum) and the padding inlined into the copies and the write-back.
"""
from __future__ import annotations

import math
from typing import Mapping

from kernels.tiles import accumulators, block_threads

MODES = ("bf16",)
FRAGMENT = 16  # the WMMA tile: 16×16×16
CHUNK = 8  # bf16 per 16-byte cp.async
PAD = 8  # bf16 after each shared row (storage_align's offset)
DYNAMIC_SMEM = 227 * 1024  # an H100's or H200's per-block limit
DEFAULTS = {"BM": 128, "BN": 128, "BK": 32, "WM": 64, "WN": 64, "STAGES": 3, "GROUP": 8}
# Block tiles of 4 to 8 warps of 64×64 (128 accumulators a thread), the k-tile, the k-tiles in flight and the
# grouping of block rows
SPACE = {"BM": (128, 256), "BN": (128, 256), "BK": (32, 64), "STAGES": (2, 3, 4), "GROUP": (1, 8, 16)}
DESCRIPTION = ("tensor cores through TVM's WMMA intrinsics (BF16 in, FP32 out): 16-byte cp.async into padded "
               "shared tiles, pipelined k-tiles, fragments loaded a k-step ahead")


def warps(p: Mapping) -> int:
    return (p["BM"] // p["WM"]) * (p["BN"] // p["WN"])


def shared_bytes(p: Mapping) -> int:
    """The pipeline's tiles or the block's accumulators staged on their way out, whichever is larger: TVM gives the
    two the same dynamic shared memory, as their lifetimes do not overlap."""
    return max(p["STAGES"] * (p["BM"] * (p["BK"] + PAD) + p["BK"] * (p["BN"] + PAD)) * 2, p["BM"] * p["BN"] * 4)


def check(p: Mapping) -> str | None:
    if p["BM"] % p["WM"] or p["BN"] % p["WN"] or p["WM"] % FRAGMENT or p["WN"] % FRAGMENT or p["BK"] % FRAGMENT:
        return f"the warp tiles must divide the block tile into whole {FRAGMENT}×{FRAGMENT} fragments"
    if p["BK"] * p["STAGES"] > 192:
        return f"BK={p['BK']} with {p['STAGES']} stages: TVM 0.27's lowering fails (tvm_access_ptr's element type)"
    threads = warps(p) * 32
    copies = threads * CHUNK
    return (block_threads(threads) or accumulators(p["WM"] * p["WN"] // 32)
            or (None if shared_bytes(p) <= DYNAMIC_SMEM else f"{shared_bytes(p)} bytes of shared memory")
            or (None if (p["BM"] * p["BK"]) % copies == 0 and (p["BK"] * p["BN"]) % copies == 0 else
                f"the {p['BM']}×{p['BK']} and {p['BK']}×{p['BN']} tiles do not split into 16-byte copies over "
                f"{threads} threads"))


def intrinsics() -> dict:
    """TVM's WMMA intrinsics for bf16 operands and fp32 accumulators, registered once (TVM registers fp16 only)."""
    from tvm.s_tir import TensorIntrin
    from tvm.s_tir.tensor_intrin import cuda

    wanted = {
        "load_a": ("gemmbench_wmma_load_bf16_a", cuda.get_wmma_load_intrin(16, 16, 16, "bfloat16", "shared.dyn",
                                                                            False, False)),
        "load_b": ("gemmbench_wmma_load_bf16_b", cuda.get_wmma_load_intrin(16, 16, 16, "bfloat16", "shared.dyn",
                                                                            True, False)),
        "compute": ("gemmbench_wmma_sync_bf16_f32", cuda.get_wmma_sync_intrin(16, 16, 16, "bfloat16", "float32",
                                                                             False)),
        "init": ("gemmbench_wmma_fill_f32", cuda.get_wmma_fill_intrin(16, 16, 16, "float32")),
        "store": ("gemmbench_wmma_store_f32_shared_dyn", cuda.get_wmma_store_intrin(16, 16, 16, "float32",
                                                                                   "shared.dyn")),
    }
    for name, (desc, impl) in wanted.values():
        try:
            TensorIntrin.get(name)
        except Exception:  # TVM raises a bare TVMError for an unknown name
            TensorIntrin.register(name, desc, impl)
    return {role: name for role, (name, _) in wanted.items()}


def schedule(func, p: Mapping, target, bind: bool = True):
    """The scheduled matmul PrimFunc `func` (block "C", bf16 operands)."""
    from tvm import s_tir

    if not bind:
        raise ValueError("WMMA fragments are warp-wide: no unbound form")
    intrin = intrinsics()
    sch = s_tir.Schedule(func)
    block = sch.get_sblock("C")
    sch.pad_einsum(block, [p["BM"], p["BN"], p["BK"]])
    i, j, k = sch.get_loops(block)
    group = math.gcd(int(sch.get(i).extent) // p["BM"], p["GROUP"])  # whole groups of block rows only
    i, i_frag = sch.split(i, [None, FRAGMENT])
    j, j_frag = sch.split(j, [None, FRAGMENT])
    k, k_frag = sch.split(k, [None, FRAGMENT])
    sch.reorder(i, j, k, i_frag, j_frag, k_frag)
    tile = sch.blockize(i_frag)  # one 16×16×16 step: what the intrinsics replace
    i_group, i_block, i_warp, i_in = sch.split(i, [None, group, p["BM"] // p["WM"], p["WM"] // FRAGMENT])
    j_block, j_warp, j_in = sch.split(j, [None, p["BN"] // p["WN"], p["WN"] // FRAGMENT])
    ko, ki = sch.split(k, [None, p["BK"] // FRAGMENT])
    sch.reorder(i_group, j_block, i_block, i_warp, j_warp, ko, ki, i_in, j_in)
    sch.bind(sch.fuse(i_group, j_block, i_block), "blockIdx.x")
    warp = sch.fuse(i_warp, j_warp)
    sch.bind(warp, "threadIdx.y")

    for operand in (0, 1):  # 16-byte cp.async copies, spread over the block's warps and lanes
        shared = sch.cache_read(tile, operand, "shared.dyn")
        for pad in sch.get_producers(shared):  # where the shape needed padding
            sch.compute_inline(pad)
        sch.compute_at(shared, ko)
        _, by_warp, by_lane, chunk = sch.split(sch.fuse(*sch.get_loops(shared)[-2:]), [None, warps(p), 32, CHUNK])
        sch.bind(by_warp, "threadIdx.y")
        sch.bind(by_lane, "threadIdx.x")
        sch.vectorize(chunk)
        sch.storage_align(shared, 0, axis=-2, factor=16, offset=PAD)
    fragments = [sch.cache_read(tile, operand, f"wmma.matrix_{name}") for operand, name in ((0, "a"), (1, "b"))]
    for fragment in fragments:
        sch.compute_at(fragment, ki)
    staged = sch.cache_write(tile, 0, "shared.dyn")  # the accumulators' way out, a warp's tile at a time
    stored = sch.cache_write(tile, 0, "wmma.accumulator")
    sch.storage_align(stored, 0, axis=-2, factor=16, offset=4)
    sch.reverse_compute_at(stored, warp)
    sch.reverse_compute_at(staged, warp)
    for cache in (*fragments, stored):  # 16×16 fragments, the intrinsics' shape
        rows, cols = sch.get_loops(cache)[-2:]
        row_tile, row = sch.split(rows, [None, FRAGMENT])
        col_tile, col = sch.split(cols, [None, FRAGMENT])
        sch.reorder(row_tile, col_tile, row, col)
    init = sch.decompose_reduction(tile, ko)
    sch.tensorize(sch.get_loops(fragments[0])[-2], intrin["load_a"])
    sch.tensorize(sch.get_loops(fragments[1])[-2], intrin["load_b"])
    sch.tensorize(sch.get_loops(sch.get_child_blocks(init)[0])[-2], intrin["init"])
    sch.tensorize(sch.get_loops(stored)[-2], intrin["store"])
    sch.tensorize(sch.get_loops(block)[-3], intrin["compute"])
    padded_c = sch.get_consumers(staged)
    for pad in padded_c:
        sch.reverse_compute_inline(pad)
    _, lane, vector = sch.split(sch.fuse(*sch.get_loops(staged)[-2:]), [None, 32, 1 if padded_c else 4])
    sch.bind(lane, "threadIdx.x")
    sch.vectorize(vector)

    # The k-step loop's pipeline (fragments a step ahead of the mma_syncs) is injected first: the k-tile loop then
    # holds the two copies, that pipeline's prologue, its loop and its epilogue; the copies run STAGES - 1 tiles
    # ahead, asynchronously.
    sch.annotate(ki, "software_pipeline_stage", [0, 0, 1])
    sch.annotate(ki, "software_pipeline_order", [0, 1, 2])
    sch.annotate(ko, "software_pipeline_stage", [0, 0] + [p["STAGES"] - 1] * 3)
    sch.annotate(ko, "software_pipeline_order", [0, 1, 2, 3, 4])
    sch.annotate(ko, "software_pipeline_async_stages", [0])
    return sch

"""TVM on Hopper's tensor cores in TF32 without the transposing copy: wgmma's A operand from registers, written in
TVM's TIRx (the CuPy ladder's tc07 recipe).

TF32 wgmma reads shared-memory operands K-major only, and B (K×N, row-major) is MN-major: rung 07 first writes a
K-major Bᵀ with a kernel of its own, a read and a write of B per product, timed with it. Here the product is turned
around, Cᵀ = Bᵀ·Aᵀ:
- wgmma's A operand (Bᵀ's rows) comes from registers, which the threads load from B's tile as TMA stores it (lines of
  32 floats of one k, 128-byte swizzled), in any order; wgmma's B operand is A's tile as TMA stores it (a row of A is
  a column of Aᵀ: K-major). The fragments are not rounded: the tensor cores drop their low bits, as they do with
  operands from shared memory.
- A producer warpgroup (one thread issues the TMA copies) and two consumer warpgroups, each owning 64 columns of C
  (64 rows of Bᵀ, wgmma's M) and the block's BM rows of C (wgmma's N: one m64nBMk8 per k-step of 8).
- A k-tile's fragments are loaded while the group of the k-tile before is in flight (wgmma reads its registers until
  it completes), so they are double-buffered (the k-tile loop unrolled by two); setmaxnreg moves registers from the
  producer to the consumers for them and the BM / 2 accumulators.
- Blocks persist (one per SM) and loop over tiles in grouped order, so the producer fills the next tile's stages
  while the consumers store the last one's accumulators, each to its place in C (Cᵀ's element (n, m) is C's (m, n)).
"""
from __future__ import annotations

import importlib
from typing import Mapping

from kernels.tiles import cdiv

MODES = ("tf32",)
ARCH_SUFFIX = "a"  # wgmma and its TMA need sm_90a
USES = ("07_tirx_wgmma.py",)  # its launch helpers: rows padded for TMA
LINE = 128  # bytes of a swizzled line: 32 floats
BK = LINE // 4  # k per stage
COLUMNS = 128  # columns of C per block: two consumer warpgroups of 64
THREADS = 3 * 128  # the producer warpgroup and two consumers
CONSUMER_REGISTERS, PRODUCER_REGISTERS = 232, 40  # setmaxnreg's split of the register file
DEFAULTS = {"BM": 256, "STAGES": 4, "GROUP": 8}  # tc07's
SPACE = {"BM": [128, 256], "STAGES": [3, 4, 5, 6], "GROUP": [8, 16]}  # tc07's
DESCRIPTION = ("TF32 as Cᵀ = Bᵀ·Aᵀ in TVM's TIRx: B's fragments loaded from its MN-major tile into registers "
               "(wgmma's A), no copy of B; TMA producer, persistent blocks")


def _rung07():
    return importlib.import_module("kernels.tvm.07_tirx_wgmma")


def threads(p: Mapping) -> int:
    return THREADS


def shared_bytes(p: Mapping) -> int:
    """The stages' tiles, with a kilobyte of slack to align them to 1024 bytes (the swizzle's period)."""
    return 1024 + p["STAGES"] * (p["BM"] + COLUMNS) * LINE


def check(p: Mapping) -> str | None:
    if p["BM"] not in (128, 256):
        return "BM must be one wgmma's N: 128 or 256"
    if p["STAGES"] < 3:
        return "STAGES must be at least 3: a stage under the wgmma group in flight, one being read, one filling"
    if shared_bytes(p) > _rung07().DYNAMIC_SMEM:
        return f"{shared_bytes(p)} bytes of shared memory"
    return None


def b_word(n, k, start=0):
    """Where element (n, k) of a stage's B tile lies, in 32-bit words, the tile starting at word `start`:
    COLUMNS / 32 blocks of BK lines (one k each) of 32 floats of n, each line's 16-byte chunks XORed with its place
    in the 8-line pattern (TMA's 128-byte swizzle). Python integers or TIR expressions alike."""
    return start + n // 32 * 32 * BK + k * 32 + (n % 32 // 4 ^ k % 8) * 4 + n % 4


def kernel(p: Mapping, mode: str):
    """The TIRx PrimFunc of parameters `p`: C (M×N, float32) = A·B from the tensor maps of A (M×K, BM-row boxes) and of
    B (K×N, 32×32 boxes), on a persistent grid of `grid` blocks over `tiles` tiles."""
    from tvm.script import tirx as T

    BM, STAGES, GROUP = p["BM"], p["STAGES"], p["GROUP"]
    A_BYTES, B_BYTES = BM * LINE, BK * COLUMNS * 4
    STAGE_BYTES = A_BYTES + B_BYTES
    ACC = BM // 2  # accumulators a consumer thread holds
    TMA = "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
    WGMMA = f"wgmma.mma_async.sync.aligned.m64n{BM}k8.f32.tf32.tf32"

    @T.prim_func
    def gemm(a_map: T.handle("tensormap"), b_map: T.handle("tensormap"), c_handle: T.handle,
             M: T.int32, N: T.int32, K: T.int32, tiles: T.int32, grid: T.int32):
        C = T.match_buffer(c_handle, (M, N), "float32")
        T.device_entry()
        bx = T.cta_id([grid])
        tx = T.thread_id([THREADS])
        smem = T.alloc_buffer((shared_bytes(p),), "uint8", scope="shared.dyn")
        words = T.decl_buffer((shared_bytes(p) // 4,), "uint32", data=smem.data, scope="shared.dyn")
        bars = T.alloc_buffer((2 * STAGES,), "uint64", scope="shared")  # full[STAGES], then empty[STAGES]
        acc = T.alloc_buffer((ACC,), "float32", scope="local")
        frag = T.alloc_buffer((2, 16), "uint32", scope="local")  # two k-tiles: 4 k-steps of 4 registers
        offset = T.alloc_buffer((4,), "int32", scope="local")  # each fragment's word in a stage's B tile, k-step 0
        desc = T.alloc_buffer((1,), "uint64", scope="local")
        base = T.cuda.cvta_generic_to_shared(smem.ptr_to([0]))
        pad = (1024 - base % 1024) % 1024  # the stages start 1024-byte aligned
        tiles_n = T.ceildiv(N, COLUMNS)
        ktiles = T.ceildiv(K, BK)
        mine = T.ceildiv(tiles - bx, grid)  # this block's tiles: bx, bx + grid, …
        if tx == 0:
            for s in range(STAGES):
                T.ptx.mbarrier.init.shared.b64(bars.ptr_to([s]), T.uint32(1))
                T.ptx.mbarrier.init.shared.b64(bars.ptr_to([STAGES + s]), T.uint32(2 * 4))
            T.ptx.fence.mbarrier_init.release.cluster()
        T.cuda.cta_sync()
        if tx < 128:  # the producer warpgroup: one thread issues the copies
            T.ptx["setmaxnreg.dec.sync.aligned.u32"](PRODUCER_REGISTERS)
            if tx == 0:
                for t in range(mine):
                    tile = bx + t * grid
                    first_m = tile // (GROUP * tiles_n) * GROUP
                    group_rows = T.min(T.ceildiv(M, BM) - first_m, GROUP)
                    row0 = (first_m + tile % (GROUP * tiles_n) % group_rows) * BM
                    col0 = tile % (GROUP * tiles_n) // group_rows * COLUMNS
                    for kt in range(ktiles):
                        use = t * ktiles + kt
                        stage = use % STAGES
                        if use >= STAGES:  # its last use released
                            T.cuda.mbarrier_wait(bars.ptr_to([STAGES + stage]), (use // STAGES - 1) % 2)
                        T.ptx.mbarrier.arrive.expect_tx.shared.b64(bars.ptr_to([stage]), T.uint32(STAGE_BYTES))
                        at = pad + stage * STAGE_BYTES
                        T.ptx[TMA](smem.ptr_to([at]), T.address_of(a_map), kt * BK, row0, bars.ptr_to([stage]))
                        for nb in T.unroll(COLUMNS // 32):  # 32 lines (k) of 32 floats (n) each
                            T.ptx[TMA](smem.ptr_to([at + A_BYTES + nb * 32 * LINE]), T.address_of(b_map),
                                       col0 + nb * 32, kt * BK, bars.ptr_to([stage]))
        else:  # a consumer warpgroup: columns consumer·64 … +64 of the block's tile (rows of Cᵀ)
            T.ptx["setmaxnreg.inc.sync.aligned.u32"](CONSUMER_REGISTERS)
            lane = tx % 32
            g = lane // 4
            q = lane % 4
            n_warp = (tx // 128 - 1) * 64 + tx % 128 // 32 * 16  # the warp's 16 columns of the tile
            # fragment e of k-step s: Bᵀ's (row g + 8·(e%2), k 8s + q + 4·(e//2)) of the warp's 16. The swizzle's
            # XOR takes k % 8, the same at every k-step, so a k-step is 8 lines further: its word + 8·32·s.
            for e in T.unroll(4):
                offset[e] = b_word(n_warp + g + e % 2 * 8, q + e // 2 * 4)
            for t in range(mine):
                tile = bx + t * grid
                first_m = tile // (GROUP * tiles_n) * GROUP
                group_rows = T.min(T.ceildiv(M, BM) - first_m, GROUP)
                row0 = (first_m + tile % (GROUP * tiles_n) % group_rows) * BM
                col0 = tile % (GROUP * tiles_n) // group_rows * COLUMNS
                for i in T.unroll(ACC):
                    acc[i] = T.float32(0)
                for pair in range(T.ceildiv(ktiles, 2)):
                    for h in T.unroll(2):  # the fragments' buffer h: known when compiled, so they stay registers
                        kt = pair * 2 + h
                        if kt < ktiles:
                            use = t * ktiles + kt
                            stage = use % STAGES
                            at = pad + stage * STAGE_BYTES
                            T.cuda.mbarrier_wait(bars.ptr_to([stage]), use // STAGES % 2)
                            for s in T.unroll(4):
                                for e in T.unroll(4):
                                    frag[h, s * 4 + e] = words[(at + A_BYTES) // 4 + s * 8 * 32 + offset[e]]
                            T.ptx.wgmma.fence.sync.aligned()
                            for s in T.unroll(4):  # A's tile, K-major: a k-step is 32 bytes along its lines
                                T.cuda.wgmma.encode_matrix_descriptor(desc.data, smem.ptr_to([at + s * 32]), 1, 64, 3)
                                T.ptx[WGMMA](*[acc[i] for i in range(ACC)], frag[h, s * 4], frag[h, s * 4 + 1],
                                             frag[h, s * 4 + 2], frag[h, s * 4 + 3], desc[0], True, 1, 1)
                            T.ptx.wgmma.commit_group.sync.aligned()
                            # the group before is done: its stage and its fragments' buffer are free
                            T.ptx.wgmma.wait_group.sync.aligned(1)
                            if kt > 0 and lane == 0:
                                T.ptx.mbarrier.arrive.shared.b64(bars.ptr_to([STAGES + (use - 1) % STAGES]),
                                                                 T.uint32(1))
                T.ptx.wgmma.wait_group.sync.aligned(0)
                if ktiles > 0 and lane == 0:
                    T.ptx.mbarrier.arrive.shared.b64(bars.ptr_to([STAGES + (t * ktiles + ktiles - 1) % STAGES]),
                                                     T.uint32(1))
                # acc[4j + e] is Cᵀ's (row g + 8·(e//2), column 8j + 2q + e%2): C's row 8j + 2q + e%2, column g (+8)
                for j in T.unroll(BM // 8):
                    for e in T.unroll(4):
                        r = row0 + j * 8 + q * 2 + e % 2
                        c = col0 + n_warp + g + e // 2 * 8
                        if r < M and c < N:
                            C[r, c] = acc[j * 4 + e]
    return gemm


def launch(p: Mapping, a, b, c, buffers: dict, stream) -> list[tuple[str, tuple, tuple, dict]]:
    """The product's one launch (kernel "main"): the tensor maps of A and B as they are stored (of copies with padded
    rows where their rows are not 16-byte aligned), one block per SM at most."""
    import cupy
    import numpy

    from kernels.cupy.tensorcore.tma import tensor_map

    m, k = a.shape
    n = b.shape[1]
    rung07 = _rung07()
    a, lda = rung07._rows_aligned(a, buffers, "a", stream)
    b, ldb = rung07._rows_aligned(b, buffers, "b", stream)
    tiles = cdiv(m, p["BM"]) * cdiv(n, COLUMNS)
    grid = min(tiles, cupy.cuda.Device().attributes["MultiProcessorCount"])
    arguments = {"a_map": tensor_map(a.data.ptr, m, k, lda, 4, p["BM"]),
                 "b_map": tensor_map(b.data.ptr, k, n, ldb, 4, BK), "C_ptr": c,
                 **{name: numpy.int32(v) for name, v in (("M", m), ("N", n), ("K", k), ("tiles", tiles),
                                                     ("grid", grid))}}
    return [("main", (grid,), (THREADS,), arguments)]

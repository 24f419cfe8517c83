"""TVM on Hopper's tensor cores: BF16 or TF32 operands, FP32 accumulators, wgmma
fed by TMA, written in TVM's TIRx.

TVM 0.27's schedule language has no wgmma intrinsic to tensorize to (see 06_wmma.py), but its TIRx language, the
tile-level kernel language beside it, has Hopper's instructions as operations (T.ptx: wgmma, cp.async.bulk.tensor,
mbarrier) and a tensor map as a parameter type; TVM generates the CUDA source, as for every rung of this family. So
this rung is not a schedule of the matmul: it is the kernel written in TIRx, the CuPy ladder's tc05 recipe (a
producer warpgroup and BM/64 consumer warpgroups):
- One producer thread fills each of STAGES stages with a TMA copy of A (BM rows × one 128-byte line of k: 64 bf16
  or 32 floats) and of B, 128-byte swizzled as wgmma reads them; the TMA unit zero-fills what lies outside the
  matrices. In BF16, B is read as it is stored (one copy per 64 columns, wgmma reads it transposed); TF32 wgmma
  reads only K-major operands, so in TF32 a kernel written alongside (`k_major`, TIRx too) first writes Bᵀ, and the
  copy reads BN of its rows (as tc05 does; that transposition is timed with the product).
- Stages are handed over by mbarriers: full[s] completes when the copies' bytes have landed, empty[s] when every
  consumer warp has released the stage.
- Each consumer warpgroup holds a 64×BN accumulator tile in registers and issues one m64nBNk16 (BF16) or m64nBNk8
  (TF32) wgmma per 32 bytes of k (BN = 256: one instruction for the block's columns), keeping one group in flight.
- Tiles in groups of GROUP tile-rows (the ladder's grouped order, for L2 reuse); the accumulators are stored
  straight from registers under the matrix's bounds, a thread's two neighbouring columns as one 64-bit store where
  their address allows.
The kernel takes M, N and K at run time, so one kernel serves every shape. Rows that are not 16-byte aligned (TMA
needs 16-byte strides) are first copied into padded rows (kept from call to call, as cuBLAS keeps a workspace), and
that copy is timed with the product.
"""
from __future__ import annotations

from typing import Mapping

from kernels.tiles import cdiv

MODES = ("bf16", "tf32")
ARCH_SUFFIX = "a"  # wgmma and its TMA need sm_90a
LINE = 128  # bytes of k per stage and row: one 128-byte swizzled line
ELEMENT_BYTES = {"bf16": 2, "tf32": 4}  # of an operand, in each mode (TF32 reads float32, its low bits dropped)
TRANSPOSE_TILE = 32  # k_major's tiles, of TRANSPOSE_TILE × 8 threads
DYNAMIC_SMEM = 227 * 1024  # an H100's or H200's per-block limit
DEFAULTS = {"BM": 128, "BN": 256, "STAGES": 4, "GROUP": 8}  # tc05's tuned H200 class for 4096 and 8192
SPACE = {"BM": [64, 128, 256], "BN": [128, 256], "STAGES": [3, 4, 5, 6], "GROUP": [8, 16]}  # tc05's
DESCRIPTION = ("tensor cores through wgmma in TVM's TIRx kernel language (BF16 in, FP32 out): TMA producer, "
               "mbarrier stages, 64×BN accumulators per consumer warpgroup")


def threads(p: Mapping) -> int:
    return (p["BM"] // 64 + 1) * 128


def shared_bytes(p: Mapping) -> int:
    """The stages' tiles, with a kilobyte of slack to align them to 1024 bytes (the swizzle's period)."""
    return 1024 + p["STAGES"] * (p["BM"] + p["BN"]) * LINE


def check(p: Mapping) -> str | None:
    if p["BM"] not in (64, 128, 192, 256):
        return "BM must be a whole number of 64-row consumer warpgroups, at most 4"
    if p["BN"] not in (128, 256):
        return "BN must be one wgmma's columns, 128 or 256"
    if shared_bytes(p) > DYNAMIC_SMEM:
        return f"{shared_bytes(p)} bytes of shared memory"
    if 65536 // threads(p) < p["BN"] // 2 + 32:
        return f"{p['BN'] // 2} accumulators a thread do not fit the registers of {threads(p)} threads"
    return None


def kernel(p: Mapping, mode: str):
    """The TIRx PrimFunc of parameters `p` in `mode`: C (M×N, float32) = A·B from the tensor maps of A (M×K) and of B
    (K×N) in BF16, of Bᵀ (N×K, k_major's) in TF32."""
    from tvm.script import tirx as T

    BM, BN, STAGES, GROUP = p["BM"], p["BN"], p["STAGES"], p["GROUP"]
    CONSUMERS, THREADS = BM // 64, threads(p)
    BK = LINE // ELEMENT_BYTES[mode]  # k per stage
    TF32 = mode == "tf32"
    A_BYTES, B_BYTES = BM * LINE, BN * LINE
    STAGE_BYTES = A_BYTES + B_BYTES
    ACC = BN // 2  # accumulators a consumer thread holds
    TMA = "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
    WGMMA = (f"wgmma.mma_async.sync.aligned.m64n{BN}k8.f32.tf32.tf32" if TF32 else
             f"wgmma.mma_async.sync.aligned.m64n{BN}k16.f32.bf16.bf16")

    @T.prim_func
    def gemm(a_map: T.handle("tensormap"), b_map: T.handle("tensormap"), c_handle: T.handle,
             M: T.int32, N: T.int32, K: T.int32, tiles: T.int32, pairs: T.int32):
        C = T.match_buffer(c_handle, (M, N), "float32")
        T.device_entry()
        bx = T.cta_id([tiles])
        tx = T.thread_id([THREADS])
        smem = T.alloc_buffer((shared_bytes(p),), "uint8", scope="shared.dyn")
        bars = T.alloc_buffer((2 * STAGES,), "uint64", scope="shared")  # full[STAGES], then empty[STAGES]
        acc = T.alloc_buffer((ACC,), "float32", scope="local")
        desc_a = T.alloc_buffer((1,), "uint64", scope="local")
        desc_b = T.alloc_buffer((1,), "uint64", scope="local")
        base = T.cuda.cvta_generic_to_shared(smem.ptr_to([0]))
        pad = (1024 - base % 1024) % 1024  # the stages start 1024-byte aligned
        tiles_n = T.ceildiv(N, BN)
        first_m = bx // (GROUP * tiles_n) * GROUP
        group_rows = T.min(T.ceildiv(M, BM) - first_m, GROUP)
        in_group = bx % (GROUP * tiles_n)
        row0 = (first_m + in_group % group_rows) * BM
        col0 = in_group // group_rows * BN
        ktiles = T.ceildiv(K, BK)
        if tx == 0:
            for s in range(STAGES):
                T.ptx.mbarrier.init.shared.b64(bars.ptr_to([s]), T.uint32(1))
                T.ptx.mbarrier.init.shared.b64(bars.ptr_to([STAGES + s]), T.uint32(CONSUMERS * 4))
            T.ptx.fence.mbarrier_init.release.cluster()
        T.cuda.cta_sync()
        if tx < 128:  # the producer warpgroup: one thread issues the copies
            if tx == 0:
                for kt in range(ktiles):
                    stage = kt % STAGES
                    if kt >= STAGES:  # its last use released
                        T.cuda.mbarrier_wait(bars.ptr_to([STAGES + stage]), (kt // STAGES - 1) % 2)
                    T.ptx.mbarrier.arrive.expect_tx.shared.b64(bars.ptr_to([stage]), T.uint32(STAGE_BYTES))
                    at = pad + stage * STAGE_BYTES
                    T.ptx[TMA](smem.ptr_to([at]), T.address_of(a_map), kt * BK, row0, bars.ptr_to([stage]))
                    if TF32:  # BN rows of Bᵀ, K-major as A
                        T.ptx[TMA](smem.ptr_to([at + A_BYTES]), T.address_of(b_map), kt * BK, col0,
                                   bars.ptr_to([stage]))
                    else:
                        for nb in T.unroll(BN // 64):
                            T.ptx[TMA](smem.ptr_to([at + A_BYTES + nb * BK * 128]), T.address_of(b_map),
                                       col0 + nb * 64, kt * BK, bars.ptr_to([stage]))
        else:  # a consumer warpgroup: rows consumer·64 … +64 of the block's tile
            consumer = tx // 128 - 1
            warp = tx % 128 // 32
            lane = tx % 32
            for i in T.unroll(ACC):
                acc[i] = T.float32(0)
            for kt in range(ktiles):
                stage = kt % STAGES
                T.cuda.mbarrier_wait(bars.ptr_to([stage]), kt // STAGES % 2)
                T.ptx.wgmma.fence.sync.aligned()
                at = pad + stage * STAGE_BYTES
                for k in T.unroll(LINE // 32):
                    # A K-major, a k-step 32 bytes along the line; B in BF16 MN-major (read transposed): 64-column
                    # blocks BK lines apart, in TF32 K-major as A. Offsets in 16-byte units; 3: the 128-byte swizzle.
                    T.cuda.wgmma.encode_matrix_descriptor(desc_a.data, smem.ptr_to([at + consumer * 64 * 128 + k * 32]),
                                                          1, 64, 3)
                    if TF32:
                        T.cuda.wgmma.encode_matrix_descriptor(desc_b.data, smem.ptr_to([at + A_BYTES + k * 32]),
                                                              1, 64, 3)
                        T.ptx[WGMMA](*[acc[i] for i in range(ACC)], desc_a[0], desc_b[0], True, 1, 1)
                    else:
                        T.cuda.wgmma.encode_matrix_descriptor(desc_b.data, smem.ptr_to([at + A_BYTES + k * 16 * 128]),
                                                              BK * 128 // 16, 64, 3)
                        T.ptx[WGMMA](*[acc[i] for i in range(ACC)], desc_a[0], desc_b[0], True, 1, 1, 0, 1)
                T.ptx.wgmma.commit_group.sync.aligned()
                T.ptx.wgmma.wait_group.sync.aligned(1)  # the group before this one is done: release its stage
                if kt > 0 and lane == 0:
                    T.ptx.mbarrier.arrive.shared.b64(bars.ptr_to([STAGES + (kt - 1) % STAGES]), T.uint32(1))
            T.ptx.wgmma.wait_group.sync.aligned(0)
            if ktiles > 0 and lane == 0:
                T.ptx.mbarrier.arrive.shared.b64(bars.ptr_to([STAGES + (ktiles - 1) % STAGES]), T.uint32(1))
            # the accumulators in mma.sync's 16×8 tile order: 8-column group j, rows lane/4 and lane/4 + 8; a
            # thread's two neighbouring columns (c even) stored as one float2 where `pairs` says each pair is 8-byte
            # aligned (N even, C 8-byte aligned)
            for j in T.unroll(BN // 8):
                for h in T.unroll(2):
                    r = row0 + consumer * 64 + warp * 16 + lane // 4 + h * 8
                    c = col0 + j * 8 + lane % 4 * 2
                    if pairs != 0:
                        if r < M and c < N:
                            T.ptx["st.global.v2.f32"](C.ptr_to([r, c]), acc[j * 4 + h * 2], acc[j * 4 + h * 2 + 1])
                    else:
                        if r < M and c < N:
                            C[r, c] = acc[j * 4 + h * 2]
                        if r < M and c + 1 < N:
                            C[r, c + 1] = acc[j * 4 + h * 2 + 1]
    return gemm


def helpers(p: Mapping, mode: str) -> dict:
    """The kernels launched before the product's, by name: in TF32, k_major."""
    return {"k_major": k_major()} if mode == "tf32" else {}


def k_major():
    """Bᵀ (N×K, rows ld floats apart) from B (K×N, row-major): the K-major operand that TF32 wgmma reads. Tiles of
    TRANSPOSE_TILE² through shared memory, padded by a float (conflict-free columns): reads and writes coalesced."""
    from tvm.script import tirx as T

    TILE = TRANSPOSE_TILE
    ROWS = TILE // 8  # rows each thread moves

    @T.prim_func
    def k_major(b_handle: T.handle, bt_handle: T.handle, K: T.int32, N: T.int32, ld: T.int32, tiles: T.int32):
        B = T.match_buffer(b_handle, (K, N), "float32")
        Bt = T.match_buffer(bt_handle, (N, ld), "float32")
        T.device_entry()
        bx = T.cta_id([tiles])
        tx = T.thread_id([TILE * 8])
        tile = T.alloc_buffer((TILE, TILE + 1), "float32", scope="shared")
        tiles_n = T.ceildiv(N, TILE)
        n0 = bx % tiles_n * TILE
        k0 = bx // tiles_n * TILE
        x = tx % TILE
        y = tx // TILE
        for r in T.unroll(ROWS):
            if k0 + y + r * 8 < K and n0 + x < N:
                tile[y + r * 8, x] = B[k0 + y + r * 8, n0 + x]
        T.cuda.cta_sync()
        for r in T.unroll(ROWS):
            if n0 + y + r * 8 < N and k0 + x < K:
                Bt[n0 + y + r * 8, k0 + x] = tile[x, y + r * 8]
    return k_major


def launch(p: Mapping, a, b, c, buffers: dict, stream) -> list[tuple[str, tuple, tuple, dict]]:
    """The launches of C = A·B, in order, each (kernel: "main" for the product or a name of `helpers`, grid, block,
    its arguments by name): the product from the tensor maps of A and B (of padded copies where their rows are not
    16-byte aligned), in TF32 after k_major has written Bᵀ."""
    import numpy

    from kernels.cupy.tensorcore.tma import tensor_map

    m, k = a.shape
    n = b.shape[1]
    element = a.dtype.itemsize
    launches = []
    a, lda = _rows_aligned(a, buffers, "a", stream)
    if element == ELEMENT_BYTES["tf32"]:
        ld = _aligned(k, element)
        bt = _buffer(buffers, "bt", (n, ld), a.dtype)
        transposing = cdiv(n, TRANSPOSE_TILE) * cdiv(k, TRANSPOSE_TILE)
        launches.append(("k_major", (transposing,), (TRANSPOSE_TILE * 8,),
                         {"B_ptr": b, "Bt_ptr": bt, "K": numpy.int32(k), "N": numpy.int32(n),
                          "ld": numpy.int32(ld), "tiles": numpy.int32(transposing)}))
        b_map = tensor_map(bt.data.ptr, n, k, ld, element, p["BN"])
    else:
        b, ldb = _rows_aligned(b, buffers, "b", stream)
        b_map = tensor_map(b.data.ptr, k, n, ldb, element, 64)
    tiles = cdiv(m, p["BM"]) * cdiv(n, p["BN"])
    arguments = {"a_map": tensor_map(a.data.ptr, m, k, lda, element, p["BM"]), "b_map": b_map, "C_ptr": c,
                 **{name: numpy.int32(v) for name, v in (("M", m), ("N", n), ("K", k), ("tiles", tiles),
                                                     ("pairs", n % 2 == 0 and c.data.ptr % 8 == 0))}}
    return launches + [("main", (tiles,), (threads(p),), arguments)]


def _rows_aligned(x, buffers: dict, name: str, stream) -> tuple:
    """x (bf16 bits as uint16, or float32) with rows 16 bytes apart, and its row stride: x itself, or a copy into
    padded rows kept in `buffers` (ordered on the run's stream)."""
    import cupy

    rows, cols = x.shape
    ld = _aligned(cols, x.itemsize)
    if ld == cols and x.data.ptr % 16 == 0:
        return x, cols
    padded = _buffer(buffers, name, (rows, ld), x.dtype)
    cupy.cuda.runtime.memcpy2DAsync(padded.data.ptr, ld * x.itemsize, x.data.ptr, cols * x.itemsize,
                                    cols * x.itemsize, rows, cupy.cuda.runtime.memcpyDeviceToDevice, stream.ptr)
    return padded, ld


def _aligned(cols: int, element_bytes: int) -> int:
    """The row stride, in elements, of `cols` columns padded to 16 bytes (TMA's stride)."""
    return cdiv(cols * element_bytes, 16) * 16 // element_bytes


def _buffer(buffers: dict, name: str, shape: tuple, dtype):
    """The launch's buffer `name` of `shape`, kept from call to call (made anew when the shape changes)."""
    import cupy

    if name not in buffers or buffers[name].shape != shape:
        buffers[name] = cupy.empty(shape, dtype=dtype)
    return buffers[name]

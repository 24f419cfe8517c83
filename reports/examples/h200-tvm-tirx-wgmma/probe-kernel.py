"""TIRx probe: tc05's BF16 pipeline (TMA producer warpgroup, wgmma consumer warpgroups, mbarriers) in TVM's TIRx."""
import sys
import tvm
from tvm.script import tirx as T


def make(BM=128, BN=256, STAGES=4, GROUP=8):
    BK = 64
    CONSUMERS = BM // 64
    THREADS = (CONSUMERS + 1) * 128
    A_BYTES, B_BYTES = BM * BK * 2, BK * BN * 2
    STAGE_BYTES = A_BYTES + B_BYTES
    SMEM = 1024 + STAGES * STAGE_BYTES
    ACC = BN // 2
    WIDE = 256 if BN % 256 == 0 else 128
    shape = f"m64n{WIDE}k16"

    @T.prim_func
    def gemm(a_map: T.handle("tensormap"), b_map: T.handle("tensormap"), c_handle: T.handle,
             M: T.int32, N: T.int32, K: T.int32, tiles: T.int32):
        C = T.match_buffer(c_handle, (M, N), "float32")
        T.device_entry()
        bx = T.cta_id([tiles])
        tx = T.thread_id([THREADS])
        smem = T.alloc_buffer((SMEM,), "uint8", scope="shared.dyn")
        bars = T.alloc_buffer((2 * STAGES,), "uint64", scope="shared")
        acc = T.alloc_buffer((ACC,), "float32", scope="local")
        desc_a = T.alloc_buffer((1,), "uint64", scope="local")
        desc_b = T.alloc_buffer((1,), "uint64", scope="local")
        base = T.cuda.cvta_generic_to_shared(smem.ptr_to([0]))
        pad = (1024 - base % 1024) % 1024
        # grouped tile order
        tiles_m = T.ceildiv(M, BM)
        tiles_n = T.ceildiv(N, BN)
        first_m = bx // (GROUP * tiles_n) * GROUP
        group_rows = T.min(tiles_m - first_m, GROUP)
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
        if tx < 128:
            if tx == 0:
                for kt in range(ktiles):
                    stage = kt % STAGES
                    if kt >= STAGES:
                        T.cuda.mbarrier_wait(bars.ptr_to([STAGES + stage]), (kt // STAGES - 1) % 2)
                    T.ptx.mbarrier.arrive.expect_tx.shared.b64(bars.ptr_to([stage]), T.uint32(STAGE_BYTES))
                    a_at = pad + stage * STAGE_BYTES
                    T.ptx["cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"](
                        smem.ptr_to([a_at]), T.address_of(a_map), kt * BK, row0, bars.ptr_to([stage]))
                    for nb in T.unroll(BN // 64):
                        T.ptx["cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"](
                            smem.ptr_to([a_at + A_BYTES + nb * BK * 128]), T.address_of(b_map), col0 + nb * 64,
                            kt * BK, bars.ptr_to([stage]))
        else:
            consumer = tx // 128 - 1
            warp = tx % 128 // 32
            lane = tx % 32
            for i in T.unroll(ACC):
                acc[i] = T.float32(0)
            for kt in range(ktiles):
                stage = kt % STAGES
                T.cuda.mbarrier_wait(bars.ptr_to([stage]), kt // STAGES % 2)
                T.ptx.wgmma.fence.sync.aligned()
                a_at = pad + stage * STAGE_BYTES + consumer * 64 * 128
                for k in T.unroll(BK // 16):
                    T.cuda.wgmma.encode_matrix_descriptor(desc_a.data, smem.ptr_to([a_at + k * 32]), 1, 64, 3)
                    T.cuda.wgmma.encode_matrix_descriptor(desc_b.data, smem.ptr_to([a_at - consumer * 64 * 128 + A_BYTES + k * 16 * 128]), BK * 128 // 16, 64, 3)
                    for n in T.unroll(BN // WIDE):
                        T.ptx[f"wgmma.mma_async.sync.aligned.{shape}.f32.bf16.bf16"](
                            *[acc[n * WIDE // 2 + i] for i in range(WIDE // 2)], desc_a[0],
                            desc_b[0] + T.uint64(n * WIDE // 64 * BK * 128 // 16), True, 1, 1, 0, 1)
                T.ptx.wgmma.commit_group.sync.aligned()
                T.ptx.wgmma.wait_group.sync.aligned(1)
                if kt > 0 and lane == 0:
                    T.ptx.mbarrier.arrive.shared.b64(bars.ptr_to([STAGES + (kt - 1) % STAGES]), T.uint32(1))
            T.ptx.wgmma.wait_group.sync.aligned(0)
            if ktiles > 0 and lane == 0:
                T.ptx.mbarrier.arrive.shared.b64(bars.ptr_to([STAGES + (ktiles - 1) % STAGES]), T.uint32(1))
            for j in T.unroll(BN // 8):
                for h in T.unroll(2):
                    r = row0 + consumer * 64 + warp * 16 + lane // 4 + h * 8
                    c = col0 + j * 8 + lane % 4 * 2
                    if r < M and c < N:
                        C[r, c] = acc[j * 4 + h * 2]
                    if r < M and c + 1 < N:
                        C[r, c + 1] = acc[j * 4 + h * 2 + 1]
    return gemm


if __name__ == "__main__":
    f = make(*map(int, sys.argv[1:5]))
    mod = tvm.compile(tvm.IRModule({"main": f}), target=tvm.target.Target({"kind": "cuda", "arch": "sm_90a"}),
                      tir_pipeline="tirx")
    src = mod.mod.imports[0].inspect_source()
    open(sys.argv[5], "w").write(src)

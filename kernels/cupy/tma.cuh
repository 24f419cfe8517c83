// The Tensor Memory Accelerator, shared by the rungs it feeds (tensorcore/tc05_tma.cu and the rungs built on it,
// 14_warp_specialized.cu): the tensor map a copy reads, the copy itself, the barrier that counts its bytes, and the
// grouped order of a persistent block's tiles.
#pragma once
#include "common.cuh"
#include "mbarrier.cuh"

// cuda.h's CUtensorMap: the 128-byte, 64-byte aligned descriptor of a TMA copy (NVRTC has no cuda.h).
struct alignas(64) TensorMap {
    unsigned long long opaque[16];
};

// Arrive, and tell the barrier to also wait for this many bytes of TMA copies.
__device__ __forceinline__ void barrier_expect(unsigned long long* barrier, int bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(shared_address(barrier)), "r"(bytes)
                 : "memory");
}

// The box of a 2-D tensor map at (inner, outer) elements to shared memory; the barrier counts its bytes.
__device__ __forceinline__ void tma_load(void* tile, const TensorMap& map, int inner, int outer,
                                         unsigned long long* barrier) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
        ::"r"(shared_address(tile)), "l"(&map), "r"(inner), "r"(outer), "r"(shared_address(barrier))
        : "memory");
}

// Tile `tile` of 0..tiles-1 in groups of GROUP tile-rows, each group column by column: its origin (rung 10's order).
template <int BM, int BN, int GROUP>
__device__ __forceinline__ int2 grouped_tile(int tile, int M, int N) {
    const int tiles_m = CEIL_DIV(M, BM), tiles_n = CEIL_DIV(N, BN);
    const int per_group = GROUP * tiles_n, first_m = (tile / per_group) * GROUP;
    const int group_rows = min(tiles_m - first_m, GROUP), in_group = tile % per_group;
    return make_int2((first_m + in_group % group_rows) * BM, (in_group / group_rows) * BN);
}

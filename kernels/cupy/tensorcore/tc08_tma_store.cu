// Tensor-core rung 8 — tc06 with C stored by the Tensor Memory Accelerator (sm_90a, BF16 and TF32).
//  * In tc05 and tc06 a consumer's epilogue is 64 float2 stores a thread, straight from its accumulators to C: the
//    warps wait for every store to leave before their next tile's first wgmma, so the tensor cores idle for the
//    epilogue of each tile. At 4096 a BF16 tile's epilogue writes 128 KiB for about 65,000 cycles of wgmma.
//  * Here each consumer warpgroup writes its accumulators to shared memory, 32 columns at a time (a 64-row × 128-byte
//    box, 128-byte swizzled as TMA reads it, so a warp's 8-byte writes land in distinct banks), and one of its threads
//    hands the box to TMA (cp.async.bulk.tensor global ← shared) and moves on. The copy runs while the warpgroup writes
//    the next box and then starts its next tile; it waits only where it must reuse a buffer the TMA unit is still
//    reading (BUFFERS of them per consumer). TMA clips the boxes at C's edges.
//  * A named barrier per consumer warpgroup (not the block's) orders its threads' writes before the copy and the
//    copy's reads before the buffer is written again; the other warpgroups carry on.
//  * Rows of C that are not 16-byte aligned keep tc05's stores (no tensor map can describe them).
#include "tc06_persistent.cu"

constexpr int STORE_COLUMNS = 32;  // floats of C per 128-byte swizzled line: the inner extent of a store box

__device__ __forceinline__ void tma_store(const TensorMap& map, const void* box, int inner, int outer) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];\n"
                 ::"l"(&map), "r"(shared_address(box)), "r"(inner), "r"(outer) : "memory");
}

// The 128 threads of consumer warpgroup `consumer` meet (named barrier 1 + consumer; 0 is __syncthreads's).
__device__ __forceinline__ void warpgroup_sync(int consumer) {
    asm volatile("bar.sync %0, 128;\n" ::"r"(consumer + 1) : "memory");
}

template <int BM, int BUFFERS>
struct TmaStores {
    static constexpr int BOX_BYTES = 64 * STORE_COLUMNS * 4;
    __device__ static constexpr int smem_bytes() { return BM / 64 * BUFFERS * BOX_BYTES; }
    const TensorMap& c_map;

    // A consumer's 64 rows × BN columns from row0 + 64·consumer, col0, one 32-column box at a time. Thread (warp,
    // lane) holds rows 16·warp + lane / 4 (+ 8) and columns 8j + 2·(lane % 4) (+ 1), j < BN / 8: box j / 4.
    template <int BN>
    __device__ __forceinline__ void store(float*, const float (&acc)[BN / 8][4], char* staging, int row0, int col0,
                                          int, int, int consumer, int warp, int lane) const {
        const bool issuer = warp == 0 && lane == 0;
        char* buffers = staging + consumer * BUFFERS * BOX_BYTES;
#pragma unroll
        for (int box = 0; box < BN / STORE_COLUMNS; ++box) {
            char* buffer = buffers + box % BUFFERS * BOX_BYTES;
            if (issuer) asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(BUFFERS - 1) : "memory");
            warpgroup_sync(consumer);  // the copy that last read this buffer is done with it
#pragma unroll
            for (int jj = 0; jj < STORE_COLUMNS / 8; ++jj)
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const int r = warp * 16 + lane / 4 + h * 8, unit = jj * 2 + lane % 4 / 2;  // 16-byte unit of 8
                    const float* v = acc[box * STORE_COLUMNS / 8 + jj] + 2 * h;
                    *reinterpret_cast<float2*>(buffer + r * 128 + (unit ^ r % 8) * 16 + lane % 2 * 8) =
                        make_float2(v[0], v[1]);
                }
            asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // for the TMA unit to see the writes
            warpgroup_sync(consumer);
            if (issuer) {
                tma_store(c_map, buffer, col0 + box * STORE_COLUMNS, row0 + consumer * 64);
                asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
            }
        }
    }

    // Every copy has written C before the block leaves (and its shared memory with it).
    __device__ __forceinline__ void finish() const {
        if (threadIdx.x % 128 == 0) asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
    }
};

template <int BM, int BN, int STAGES, int GROUP, int BUFFERS, bool VEC>
__global__ void __launch_bounds__((BM / 64 + 1) * 128, 1)
tc_tma_store_bf16(int M, int N, int K, const __grid_constant__ TensorMap a_map,
                  const __grid_constant__ TensorMap b_map, const __grid_constant__ TensorMap c_map,
                  const unsigned short* __restrict__ A, const unsigned short* __restrict__ B, float* __restrict__ C) {
    if constexpr (VEC) {
        tma_gemm<TmaBf16, BM, BN, STAGES, GROUP, true>(M, N, K, a_map, b_map, A, B, C, TmaStores<BM, BUFFERS>{c_map});
    } else {
        tma_gemm<TmaBf16, BM, BN, STAGES, GROUP, false>(M, N, K, a_map, b_map, A, B, C, DirectStores<false>());
    }
}

// b_map: Bᵀ's (k_major_tf32), as in tc05.
template <int BM, int BN, int STAGES, int GROUP, int BUFFERS, bool VEC>
__global__ void __launch_bounds__((BM / 64 + 1) * 128, 1)
tc_tma_store_tf32(int M, int N, int K, const __grid_constant__ TensorMap a_map,
                  const __grid_constant__ TensorMap b_map, const __grid_constant__ TensorMap c_map,
                  const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C) {
    if constexpr (VEC) {
        tma_gemm<TmaTf32, BM, BN, STAGES, GROUP, true>(M, N, K, a_map, b_map, A, B, C, TmaStores<BM, BUFFERS>{c_map});
    } else {
        tma_gemm<TmaTf32, BM, BN, STAGES, GROUP, true>(M, N, K, a_map, b_map, A, B, C, DirectStores<false>());
    }
}

// Tensor-core rung 9 — tc07 (TF32 without the copy of B) with tc08's TMA stores of C (sm_90a, TF32).
//  * tc07's accumulators hold Cᵀ, so its epilogue stores C 4 bytes at a time (a warp's store covers 4 rows × 32
//    bytes), 128 stores a thread per 256-row tile, with the tensor cores idle; at 4096 that is the shortest tiles'
//    largest fixed cost, as it was for tc05 in BF16 (tc08).
//  * Here each consumer warpgroup transposes its accumulators into shared memory instead: boxes of 64 rows of C × 32
//    columns (one 128-byte swizzled line a row, as TMA reads it), the warpgroup's two 32-column halves side by side.
//    For one accumulator index a warp's 32 4-byte writes cover 4 rows × 8 columns of one half, and with the swizzle
//    they land in 32 distinct banks. One thread hands each box to TMA and the warpgroup goes on to its next 64 rows,
//    then to its next tile, while the copies drain; it waits only to reuse a box TMA is still reading (BUFFERS pairs).
#include "tc07_registers.cu"
#include "tc08_tma_store.cu"

template <int BUFFERS>
struct TransposedTmaStores {
    static constexpr int PAIR_BYTES = 2 * 64 * STORE_COLUMNS * 4;  // a 64-row box for each 32-column half
    __device__ static constexpr int smem_bytes() { return 2 * BUFFERS * PAIR_BYTES; }  // two consumer warpgroups
    const TensorMap& c_map;

    // Thread (warp, lane) of the consumer whose 64 columns start at n_warp - 16·warp: acc[j] holds C's rows 8j + 2t
    // (+ 1), columns n_warp + g (+ 8), with g = lane / 4, t = lane % 4 (TransposedStores).
    template <int BM>
    __device__ __forceinline__ void store(float*, const float (&acc)[BM / 8][4], char* staging, int row0, int col0,
                                          int, int, int n_warp, int lane) const {
        const int warp = n_warp % 64 / 16, consumer = n_warp / 64, g = lane / 4, t = lane % 4;
        const bool issuer = warp == 0 && lane == 0;
        char* pairs = staging + consumer * BUFFERS * PAIR_BYTES;
#pragma unroll
        for (int rows = 0; rows < BM / 64; ++rows) {
            char* pair = pairs + rows % BUFFERS * PAIR_BYTES;
            char* box = pair + warp / 2 * (PAIR_BYTES / 2);  // warps 0 and 1: columns 0–31 of the consumer's 64
            if (issuer) asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(BUFFERS - 1) : "memory");
            warpgroup_sync(consumer);  // the copies that last read these boxes are done with them
#pragma unroll
            for (int jj = 0; jj < 8; ++jj)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int r = jj * 8 + 2 * t + e % 2, c = warp % 2 * 16 + g + e / 2 * 8;  // in the box
                    *reinterpret_cast<float*>(box + r * 128 + ((c / 4) ^ (r % 8)) * 16 + c % 4 * 4) =
                        acc[rows * 8 + jj][e];
                }
            asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // for the TMA unit to see the writes
            warpgroup_sync(consumer);
            if (issuer) {
                const int col = col0 + consumer * 64, row = row0 + rows * 64;
                tma_store(c_map, pair, col, row);
                tma_store(c_map, pair + PAIR_BYTES / 2, col + STORE_COLUMNS, row);
                asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
            }
        }
    }

    // Every copy has written C before the block leaves (and its shared memory with it).
    __device__ __forceinline__ void finish() const {
        if (threadIdx.x % 128 == 0) asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
    }
};

// VEC: C's rows are 16-byte aligned (a tensor map can describe C); else tc07's stores.
template <int BM, int STAGES, int GROUP, int BUFFERS, bool VEC>
__global__ void __launch_bounds__(3 * 128, 1)
tc_registers_tma_store_tf32(int M, int N, int K, const __grid_constant__ TensorMap a_map,
                            const __grid_constant__ TensorMap b_map, const __grid_constant__ TensorMap c_map,
                            const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C) {
    if constexpr (VEC) {
        registers_gemm<BM, STAGES, GROUP>(M, N, K, a_map, b_map, C, TransposedTmaStores<BUFFERS>{c_map});
    } else {
        registers_gemm<BM, STAGES, GROUP>(M, N, K, a_map, b_map, C, TransposedStores());
    }
}

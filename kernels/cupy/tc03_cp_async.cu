// Tensor-core rung 3 — tc02 with rung 10's cp.async pipeline and fragments double-buffered in registers (TF32).
//  * STAGES buffers of tc02's padded A and B tiles in dynamic shared memory, filled by 16-byte cp.async.cg
//    (4-byte copies for unaligned rows) with edges zero-filled by src-size: rung 10's TileCopy, wait_group
//    STAGES - 2 and one barrier per k-tile. The bytes land unrounded; tc02's fragment loads round them.
//  * Fragments double-buffered in registers: the next k-step's A (ldmatrix) and B fragments are read while this
//    k-step's mmas run. Across k-tiles as in rung 11: the barrier for tile kt + 1 sits in tile kt's last k-step, so
//    the next tile's first fragments are read while the last k-step's mmas run; the copy into the buffer tile
//    kt - 1 used is issued at the top of tile kt (everyone left that buffer at the previous barrier).
//  * Grouped block order (GROUP tile-rows) and MIN_BLOCKS resident blocks per SM (__launch_bounds__) as rung 10.
#include "tc02_ldmatrix.cu"
#include "10_pipelined.cu"

template <int BM, int BN, int BK, int WM, int WN, int STAGES, int GROUP, int MIN_BLOCKS, bool VEC>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32, MIN_BLOCKS)
tc_cp_async(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C) {
    constexpr int WARPS_N = BN / WN, THREADS = (BM / WM) * WARPS_N * 32, FM = WM / 16, FN = WN / 8;
    constexpr int LDA = BK + 4, LDB = BN + 8, STEPS = BK / 8;
    static_assert(BM % WM == 0 && BN % WN == 0 && WM % 16 == 0 && WN % 8 == 0, "whole mma tiles");
    static_assert(BK % 16 == 0, "an even count of k-steps, so a tile's first k-step reads fragment buffer 0");
    static_assert(STAGES >= 2, "at least double buffering");
    extern __shared__ float4 smem[];
    float* As = reinterpret_cast<float*>(smem);  // [STAGES][BM][LDA]
    float* Bs = As + STAGES * BM * LDA;          // [STAGES][BK][LDB]

    const int2 origin = grouped_tile_origin<BM, BN, GROUP>(M, N);
    const int row0 = origin.x, col0 = origin.y;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int warp_row = (warp / WARPS_N) * WM, warp_col = (warp % WARPS_N) * WN;
    const int ktiles = CEIL_DIV(K, BK);

    const TileCopy<BM, BK, THREADS, LDA, VEC> copy_a(A, row0, 0, K);
    const TileCopy<BK, BN, THREADS, LDB, VEC> copy_b(B, 0, col0, N);
    auto issue = [&](int kt) {
        if (kt < ktiles) {
            const int stage = kt % STAGES;
            copy_a.issue(As + stage * BM * LDA, 0, kt * BK, M - row0, K - kt * BK);
            copy_b.issue(Bs + stage * BK * LDB, kt * BK, 0, K - kt * BK, N - col0);
        }
        cp_async_commit();  // an empty group past the end keeps the wait count uniform
    };
    // This warp's fragments of k-step kk of the tile in buffer `stage`.
    auto load = [&](unsigned (&a)[FM][4], unsigned (&b)[FN][2], int stage, int kk) {
        load_fragments<FM, FN, LDA, LDB>(a, b, As + stage * BM * LDA + warp_row * LDA + kk * 8,
                                         Bs + stage * BK * LDB + kk * 8 * LDB + warp_col, lane);
    };

#pragma unroll
    for (int kt = 0; kt < STAGES - 1; ++kt) issue(kt);
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    unsigned a[2][FM][4], b[2][FN][2];  // [k-step % 2]
    load(a[0], b[0], 0, 0);

    float acc[FM][FN][4] = {};
    for (int kt = 0; kt < ktiles; ++kt) {
        issue(kt + STAGES - 1);  // into the buffer tile kt - 1 used
        const int stage = kt % STAGES;
#pragma unroll
        for (int kk = 0; kk < STEPS; ++kk) {
            if (kk < STEPS - 1) {
                load(a[(kk + 1) % 2], b[(kk + 1) % 2], stage, kk + 1);
            } else if (kt + 1 < ktiles) {  // the same for every thread of the block
                cp_async_wait<STAGES - 2>();  // tile kt + 1 has landed (for this thread) ...
                __syncthreads();              // ... for every thread, and nobody reads tile kt any more
                load(a[0], b[0], (kt + 1) % STAGES, 0);
            }
            mma_warp_tile(acc, a[kk % 2], b[kk % 2]);
        }
    }
    store_accumulators<VEC>(C, acc, row0 + warp_row, col0 + warp_col, M, N, lane);
}

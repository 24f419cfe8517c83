// Rung 11 — cuBLAS's FP32 recipe: rung 10's pipeline with fragments double-buffered in registers.
//  * The tile recipe of cuBLAS's own FP32 kernel on Hopper (sm80_xmma_gemm_f32f32_..._tilesize256x128x8_stage3
//    _warpsize4x2x1_ffma) as defaults: a 256×128 block tile, BK 8, 8 warps as 4×2 with 64×64 warp tiles,
//    8×16 = 128 accumulators per thread, 3 cp.async stages, one block per SM (up to 255 registers a thread).
//  * Fragments double-buffered in registers: while a k-step's FMAs run, the next k-step's B fragment (and, every
//    4 k-steps, the next float4s of A) are already being read from shared memory into the other buffer, so no FMA
//    waits on a shared load it could have had earlier.
//  * Across k-tiles too: the barrier for tile kt + 1 sits in tile kt's last k-step, so the next tile's first
//    fragments are read while the last k-step's FMAs run; the copy into the buffer tile kt - 1 used is issued at
//    the top of tile kt (everyone left that buffer at the previous barrier).
//  * Block order, row-major A read along k with interleaved rows, and zero-filled edges as in rung 10.
#include "10_pipelined.cu"

template <int BM, int BN, int BK, int WM, int WN, int WMITER, int WNITER, int TM, int TN, int STAGES, int GROUP,
          int MIN_BLOCKS, bool VEC>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32, MIN_BLOCKS)
sgemm_double_buffered(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B,
                      float* __restrict__ C) {
    constexpr int THREADS = (BM / WM) * (BN / WN) * 32;
    constexpr int WSUBM = WM / WMITER, WSUBN = WN / WNITER, LR = WSUBM / TM, LC = WSUBN / TN;
    constexpr int LDA = BK + 4, AF = WMITER * TM, BF = WNITER * TN / 4;
    static_assert(LR * LC == 32, "a warp sub-tile holds exactly 32 thread tiles");
    static_assert(BK % 8 == 0, "(BK + 4) / 4 odd for conflict-free float4 reads along k; an even count of groups");
    static_assert(TN % 4 == 0 && STAGES >= 2, "B fragments are float4s; at least double buffering");
    extern __shared__ float4 smem[];
    float* As = reinterpret_cast<float*>(smem);  // [STAGES][BM][LDA]
    float* Bs = As + STAGES * BM * LDA;          // [STAGES][BK][BN]

    const int2 origin = grouped_tile_origin<BM, BN, GROUP>(M, N);
    const int row0 = origin.x, col0 = origin.y;

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int wrow = (warp / (BN / WN)) * WM + lane / LC;
    const int wcol = (warp % (BN / WN)) * WN + (lane % LC) * TN;
    const int ktiles = CEIL_DIV(K, BK);

    const TileCopy<BM, BK, THREADS, LDA, VEC> copy_a(A, row0, 0, K);
    const TileCopy<BK, BN, THREADS, BN, VEC> copy_b(B, 0, col0, N);
    auto issue = [&](int kt) {
        if (kt < ktiles) {
            const int stage = kt % STAGES;
            copy_a.issue(As + stage * BM * LDA, 0, kt * BK, M - row0, K - kt * BK);
            copy_b.issue(Bs + stage * BK * BN, kt * BK, 0, K - kt * BK, N - col0);
        }
        cp_async_commit();  // an empty group past the end keeps the wait count uniform
    };
    // A: this thread's rows as float4s along k (4 k-steps each); B: its columns of one k-step.
    auto read_a = [&](float4 (&a)[AF], const float* as, int k4) {
#pragma unroll
        for (int wm = 0; wm < WMITER; ++wm)
#pragma unroll
            for (int i = 0; i < TM; ++i) a[wm * TM + i] = lds4(as + (wrow + wm * WSUBM + i * LR) * LDA + k4);
    };
    auto read_b = [&](float4 (&b)[BF], const float* bs, int k) {
#pragma unroll
        for (int wn = 0; wn < WNITER; ++wn)
#pragma unroll
            for (int j = 0; j < TN / 4; ++j) b[wn * (TN / 4) + j] = lds4(bs + k * BN + wcol + wn * WSUBN + j * 4);
    };

#pragma unroll
    for (int kt = 0; kt < STAGES - 1; ++kt) issue(kt);
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    float4 a[2][AF], b[2][BF];  // [k-step group % 2], [k-step % 2]: BK / 4 is even, so the parity is the same in
    read_a(a[0], As, 0);        // every tile and both indices are compile-time constants
    read_b(b[0], Bs, 0);

    float acc[AF][WNITER * TN] = {};
    for (int kt = 0; kt < ktiles; ++kt) {
        issue(kt + STAGES - 1);  // into the buffer tile kt - 1 used
        const float* as = As + (kt % STAGES) * BM * LDA;
        const float* bs = Bs + (kt % STAGES) * BK * BN;
#pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
            if (kk == BK - 1) {
                if (kt + 1 < ktiles) {  // the same for every thread of the block
                    cp_async_wait<STAGES - 2>();  // tile kt + 1 has landed (for this thread) ...
                    __syncthreads();              // ... for every thread, and nobody reads tile kt any more
                    const int next = (kt + 1) % STAGES;
                    read_a(a[0], As + next * BM * LDA, 0);
                    read_b(b[0], Bs + next * BK * BN, 0);
                }
            } else {
                if ((kk + 1) % 4 == 0) read_a(a[((kk + 1) / 4) % 2], as, kk + 1);
                read_b(b[(kk + 1) % 2], bs, kk + 1);
            }
            const float4(&ac)[AF] = a[(kk / 4) % 2];
            const float4(&bc)[BF] = b[kk % 2];
#pragma unroll
            for (int i = 0; i < AF; ++i) {
                const float ai = component(ac[i], kk % 4);
#pragma unroll
                for (int j = 0; j < BF; ++j) {
                    acc[i][4 * j + 0] += ai * bc[j].x;
                    acc[i][4 * j + 1] += ai * bc[j].y;
                    acc[i][4 * j + 2] += ai * bc[j].z;
                    acc[i][4 * j + 3] += ai * bc[j].w;
                }
            }
        }
    }
    store_thread_tile<TM, TN, WSUBM, LR, WSUBN, VEC>(C, acc, row0 + wrow, col0 + wcol, M, N);
}

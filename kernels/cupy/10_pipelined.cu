// Rung 10 — multi-stage pipelining with cp.async (sm_80+), for Hopper's FP32 SIMT units.
//  * STAGES shared-memory buffers: global→shared copies of the next STAGES-1 k-tiles are in flight (cp.async,
//    no registers, no waiting) while the warps compute on the current one; one barrier per k-tile.
//  * cp.async copies bytes as they are, so A stays row-major in shared memory (As[m][k], row stride BK + 4).
//    A lane reads float4s of A along k instead; its TM rows are LR rows apart (interleaved), so the LR lanes
//    of a warp column read LR consecutive rows, and with (BK + 4)/4 odd those land in distinct bank groups.
//  * Blocks are ordered in groups of GROUP tile-rows, so the blocks resident at once share panels of A and B
//    in L2 (at 16384² a whole row of tiles would stream all of B through L2 once per row).
//  * MIN_BLOCKS resident blocks per SM are asked of the register allocator (__launch_bounds__).
//  * Out-of-range elements are zero-filled by cp.async's src-size operand, so edges need no separate path.
#include "common.cuh"

__device__ __forceinline__ void cp_async16(float* dst, const float* src, bool inside) {
    const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src), "r"(inside ? 16 : 0));
}

__device__ __forceinline__ void cp_async4(float* dst, const float* src, bool inside) {
    const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(s), "l"(src), "r"(inside ? 4 : 0));
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

template <int PENDING>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(PENDING)); }

// Copies of one ROWS×COLS tile (row stride LD in shared memory) into shared memory, zero-filled outside
// rows×cols. Everything that does not change from one k-tile to the next (this thread's offsets, its source
// pointer, the bounds of the fixed dimension) is computed once, so the main loop issues little besides cp.async.
template <int ROWS, int COLS, int THREADS, int LD, bool VEC>
struct TileCopy {
    static constexpr int C4 = COLS / 4, ROW_STEP = THREADS / C4, ITERS = CEIL_DIV(ROWS, ROW_STEP);
    static_assert(THREADS % C4 == 0, "a row of the tile must be copied by whole groups of threads");
    const float* src;  // this thread's first element of the tile at (0, 0)
    int r, c, ld;

    __device__ __forceinline__ TileCopy(const float* g, int row0, int col0, int ld_)
        : r(threadIdx.x / C4), c((threadIdx.x % C4) * 4), ld(ld_) {
        src = g + (row0 + r) * ld + col0 + c;
    }

    // The tile `row_shift` rows and `col_shift` columns on from (row0, col0); rows_left/cols_left count from there.
    __device__ __forceinline__ void issue(float* s, int row_shift, int col_shift, int rows_left, int cols_left) const {
        const float* g = src + row_shift * ld + col_shift;
#pragma unroll
        for (int it = 0; it < ITERS; ++it) {
            const int row = r + it * ROW_STEP;
            if (ROWS % ROW_STEP != 0 && row >= ROWS) break;
            float* dst = s + row * LD + c;
            if (VEC) {
                const bool inside = row < rows_left && c < cols_left;
                cp_async16(dst, inside ? g + it * ROW_STEP * ld : src, inside);
            } else {
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const bool inside = row < rows_left && c + e < cols_left;
                    cp_async4(dst + e, inside ? g + it * ROW_STEP * ld + e : src, inside);
                }
            }
        }
    }
};

// Blocks numbered 0..tiles-1 in groups of GROUP tile-rows, each group column by column: this block's tile origin.
template <int BM, int BN, int GROUP>
__device__ __forceinline__ int2 grouped_tile_origin(int M, int N) {
    const int tiles_m = CEIL_DIV(M, BM), tiles_n = CEIL_DIV(N, BN);
    const int per_group = GROUP * tiles_n, first_m = (blockIdx.x / per_group) * GROUP;
    const int group_rows = min(tiles_m - first_m, GROUP), in_group = blockIdx.x % per_group;
    return make_int2((first_m + in_group % group_rows) * BM, (in_group / group_rows) * BN);
}

template <int BM, int BN, int BK, int WM, int WN, int WMITER, int WNITER, int TM, int TN, int STAGES, int GROUP,
          int MIN_BLOCKS, bool VEC>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32, MIN_BLOCKS)
sgemm_pipelined(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C) {
    constexpr int THREADS = (BM / WM) * (BN / WN) * 32;
    constexpr int WSUBM = WM / WMITER, WSUBN = WN / WNITER, LR = WSUBM / TM, LC = WSUBN / TN;
    constexpr int LDA = BK + 4;
    static_assert(LR * LC == 32, "a warp sub-tile holds exactly 32 thread tiles");
    static_assert(BK % 8 == 0, "(BK + 4) / 4 must be odd for conflict-free float4 reads along k");
    static_assert(TN % 4 == 0 && STAGES >= 2, "B fragments are float4s; at least double buffering");
    extern __shared__ float4 smem[];
    float* As = reinterpret_cast<float*>(smem);  // [STAGES][BM][LDA]
    float* Bs = As + STAGES * BM * LDA;          // [STAGES][BK][BN]

    const int2 origin = grouped_tile_origin<BM, BN, GROUP>(M, N);
    const int row0 = origin.x, col0 = origin.y;

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int wrow = (warp / (BN / WN)) * WM + lane / LC;  // + wm·WSUBM + i·LR
    const int wcol = (warp % (BN / WN)) * WN + (lane % LC) * TN;  // + wn·WSUBN + j
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
#pragma unroll
    for (int kt = 0; kt < STAGES - 1; ++kt) issue(kt);

    float acc[WMITER * TM][WNITER * TN] = {};
    for (int kt = 0; kt < ktiles; ++kt) {
        cp_async_wait<STAGES - 2>();  // tile kt has landed (for this thread) ...
        __syncthreads();              // ... for every thread, and everyone is done with tile kt - 1
        issue(kt + STAGES - 1);       // refill the buffer tile kt - 1 used
        const float* as = As + (kt % STAGES) * BM * LDA;
        const float* bs = Bs + (kt % STAGES) * BK * BN;
#pragma unroll
        for (int k4 = 0; k4 < BK; k4 += 4) {
            float4 a[WMITER * TM];
#pragma unroll
            for (int wm = 0; wm < WMITER; ++wm)
#pragma unroll
                for (int i = 0; i < TM; ++i) a[wm * TM + i] = lds4(as + (wrow + wm * WSUBM + i * LR) * LDA + k4);
#pragma unroll
            for (int kk = 0; kk < 4; ++kk) {
                float b[WNITER * TN];
#pragma unroll
                for (int wn = 0; wn < WNITER; ++wn)
#pragma unroll
                    for (int j = 0; j < TN; j += 4) {
                        const float4 v = lds4(bs + (k4 + kk) * BN + wcol + wn * WSUBN + j);
                        float* dst = b + wn * TN + j;
                        dst[0] = v.x, dst[1] = v.y, dst[2] = v.z, dst[3] = v.w;
                    }
#pragma unroll
                for (int i = 0; i < WMITER * TM; ++i)
#pragma unroll
                    for (int j = 0; j < WNITER * TN; ++j) acc[i][j] += component(a[i], kk) * b[j];
            }
        }
    }
    store_thread_tile<TM, TN, WSUBM, LR, WSUBN, VEC>(C, acc, row0 + wrow, col0 + wcol, M, N);
}

// Tensor-core rung 3 — tc02 with rung 10's cp.async pipeline and fragments double-buffered in registers (TF32, BF16).
//  * STAGES buffers of tc02's padded A and B tiles in dynamic shared memory, filled by 16-byte cp.async.cg
//    (4-byte copies for unaligned rows) with edges zero-filled by src-size: rung 10's TileCopy, wait_group
//    STAGES - 2 and one barrier per k-tile. The bytes land unrounded; tc02's fragment loads round them.
//  * Fragments double-buffered in registers: the next k-step's A (ldmatrix) and B fragments are read while this
//    k-step's mmas run. Across k-tiles as in rung 11: the barrier for tile kt + 1 sits in tile kt's last k-step, so
//    the next tile's first fragments are read while the last k-step's mmas run; the copy into the buffer tile
//    kt - 1 used is issued at the top of tile kt (everyone left that buffer at the previous barrier).
//  * Grouped block order (GROUP tile-rows) and MIN_BLOCKS resident blocks per SM (__launch_bounds__) as rung 10.
//  * BF16 (tc_cp_async_bf16): the same pipeline on tc02's bfloat16 tiles and fragments (mma m16n8k16, B through
//    ldmatrix.x4.trans), filled by the same 16-byte cp.async of bfloat16 pairs seen as floats.
#include "tc02_ldmatrix.cu"
#include "../10_pipelined.cu"

// A ROWS×COLS bfloat16 tile (row stride LD in shared memory), zero-filled outside. VEC (rows 16-byte aligned):
// rung 10's TileCopy, 16-byte cp.async of bfloat16 pairs seen as floats.
template <int ROWS, int COLS, int THREADS, int LD, bool VEC>
struct Bf16TileCopy : TileCopy<ROWS, COLS / 2, THREADS, LD / 2, true> {
    using Pairs = TileCopy<ROWS, COLS / 2, THREADS, LD / 2, true>;
    __device__ __forceinline__ Bf16TileCopy(const unsigned short* g, int row0, int col0, int ld)
        : Pairs(reinterpret_cast<const float*>(g), row0, col0 / 2, ld / 2) {}
    __device__ __forceinline__ void issue(unsigned short* s, int row_shift, int col_shift, int rows_left,
                                          int cols_left) const {
        Pairs::issue(reinterpret_cast<float*>(s), row_shift, col_shift / 2, rows_left, cols_left / 2);
    }
};

// Rows that are not: element by element.
template <int ROWS, int COLS, int THREADS, int LD>
struct Bf16TileCopy<ROWS, COLS, THREADS, LD, false> {
    const unsigned short* src;  // the tile at (0, 0)
    int ld;
    __device__ __forceinline__ Bf16TileCopy(const unsigned short* g, int row0, int col0, int ld_)
        : src(g + row0 * ld_ + col0), ld(ld_) {}
    __device__ __forceinline__ void issue(unsigned short* s, int row_shift, int col_shift, int rows_left,
                                          int cols_left) const {
        copy_elements<ROWS, COLS, THREADS>(s, src + row_shift * ld + col_shift, ld, rows_left, cols_left,
                                           [](int r, int c) { return r * LD + c; });
    }
};

// tc02's modes with the pipeline's copies.
struct Tf32Mode : Tf32Fragments {
    template <int ROWS, int COLS, int THREADS, int LD, bool VEC>
    using Copy = TileCopy<ROWS, COLS, THREADS, LD, VEC>;
};

struct Bf16Mode : Bf16Fragments {
    template <int ROWS, int COLS, int THREADS, int LD, bool VEC>
    using Copy = Bf16TileCopy<ROWS, COLS, THREADS, LD, VEC>;
};

template <class Mode, int BM, int BN, int BK, int WM, int WN, int STAGES, int GROUP, bool VEC>
__device__ __forceinline__ void cp_async_pipeline(int M, int N, int K, const typename Mode::Element* __restrict__ A,
                                                  const typename Mode::Element* __restrict__ B, float* __restrict__ C) {
    using T = typename Mode::Element;
    constexpr int WARPS_N = BN / WN, THREADS = (BM / WM) * WARPS_N * 32, FM = WM / 16, FN = WN / 8;
    constexpr int KD = BK * Mode::PER_WORD, LDA = KD + Mode::A_PAD, LDB = BN + Mode::B_PAD;
    constexpr int STEPS = KD / Mode::K_STEP;
    static_assert(BM % WM == 0 && BN % WN == 0 && WM % 16 == 0 && WN % 8 == 0, "whole mma tiles");
    static_assert(STEPS % 2 == 0, "an even count of k-steps, so a tile's first k-step reads fragment buffer 0");
    static_assert(STAGES >= 2, "at least double buffering");
    extern __shared__ float4 smem[];
    T* As = reinterpret_cast<T*>(smem);  // [STAGES][BM][LDA]
    T* Bs = As + STAGES * BM * LDA;      // [STAGES][KD][LDB]

    const int2 origin = grouped_tile_origin<BM, BN, GROUP>(M, N);
    const int row0 = origin.x, col0 = origin.y;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int warp_row = (warp / WARPS_N) * WM, warp_col = (warp % WARPS_N) * WN;
    const int ktiles = CEIL_DIV(K, KD);

    const typename Mode::template Copy<BM, KD, THREADS, LDA, VEC> copy_a(A, row0, 0, K);
    const typename Mode::template Copy<KD, BN, THREADS, LDB, VEC> copy_b(B, 0, col0, N);
    auto issue = [&](int kt) {
        if (kt < ktiles) {
            const int stage = kt % STAGES;
            copy_a.issue(As + stage * BM * LDA, 0, kt * KD, M - row0, K - kt * KD);
            copy_b.issue(Bs + stage * KD * LDB, kt * KD, 0, K - kt * KD, N - col0);
        }
        cp_async_commit();  // an empty group past the end keeps the wait count uniform
    };
    // This warp's fragments of k-step kk of the tile in buffer `stage`.
    auto load = [&](unsigned (&a)[FM][4], unsigned (&b)[FN][2], int stage, int kk) {
        Mode::template fragments<FM, FN, LDA, LDB>(a, b, As + stage * BM * LDA + warp_row * LDA + kk * Mode::K_STEP,
                                                   Bs + stage * KD * LDB + kk * Mode::K_STEP * LDB + warp_col, lane);
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
            mma_warp_tile(acc, a[kk % 2], b[kk % 2], Bf16Operands<Mode::BF16>{});
        }
    }
    store_accumulators<VEC>(C, acc, row0 + warp_row, col0 + warp_col, M, N, lane);
}

template <int BM, int BN, int BK, int WM, int WN, int STAGES, int GROUP, int MIN_BLOCKS, bool VEC>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32, MIN_BLOCKS)
tc_cp_async(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C) {
    cp_async_pipeline<Tf32Mode, BM, BN, BK, WM, WN, STAGES, GROUP, VEC>(M, N, K, A, B, C);
}

template <int BM, int BN, int BK, int WM, int WN, int STAGES, int GROUP, int MIN_BLOCKS, bool VEC>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32, MIN_BLOCKS)
tc_cp_async_bf16(int M, int N, int K, const unsigned short* __restrict__ A, const unsigned short* __restrict__ B,
                 float* __restrict__ C) {
    cp_async_pipeline<Bf16Mode, BM, BN, BK, WM, WN, STAGES, GROUP, VEC>(M, N, K, A, B, C);
}

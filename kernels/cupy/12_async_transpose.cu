// Rung 12 — cuBLAS's FP32 recipe within the register file: A transposed into shared memory by the copy itself.
//  * Rung 11 keeps A row-major in shared memory (a 16-byte cp.async copies bytes as they are) and reads it along k
//    as float4s, so a thread holds 4 k-steps of each of its rows, twice over when double-buffered: with cuBLAS's
//    8×16 accumulators that is 255 registers, and the compiler has no room left to schedule the loads early.
//  * Here every element of A's tile is copied by a 4-byte cp.async to its transposed place (As[k][m]). A k-step
//    then needs only this thread's 8 values of A (float4s of 4 consecutive rows) and 16 of B: double-buffered
//    across k-steps (and k-tiles, as in rung 11) that is 48 registers beside the 128 accumulators.
//  * A warp's A copies read 32-byte sectors whole (its lanes run along k, BK at a time) and, with the transposed
//    tile's row stride BM + 4, a warp's 4-byte stores for BK = 8 land in 32 distinct banks. The float4 reads of A
//    and B are shared by the lanes of a warp row or column (broadcast).
//  * The FFMAs of a k-step run column by column: one value of B meets this thread's values of A in turn. On an H100
//    that measured faster than row by row, whose FFMAs Nsight Compute found stalled on dispatch (see the example's
//    README in reports/examples/h100-fp32-ceiling).
//  * Pipeline, grouped block order and zero-filled edges as in rung 10.
#include "11_double_buffered.cu"

// A ROWS×COLS tile of a row-major matrix into shared memory transposed (s[col][row], row stride LD), one 4-byte
// cp.async per element, zero-filled outside rows_left×cols_left. A thread keeps one column; lanes run along it.
template <int ROWS, int COLS, int THREADS, int LD>
struct TransposedTileCopy {
    static constexpr int ROW_STEP = THREADS / COLS, ITERS = CEIL_DIV(ROWS, ROW_STEP);
    static_assert(THREADS % COLS == 0, "a row of the tile must be copied by whole groups of threads");
    const float* src;  // this thread's first element of the tile at (0, 0)
    int r, c, ld;

    __device__ __forceinline__ TransposedTileCopy(const float* g, int row0, int col0, int ld_)
        : r(threadIdx.x / COLS), c(threadIdx.x % COLS), ld(ld_) {
        src = g + (row0 + r) * ld + col0 + c;
    }

    __device__ __forceinline__ void issue(float* s, int col_shift, int rows_left, int cols_left) const {
#pragma unroll
        for (int it = 0; it < ITERS; ++it) {
            const int row = r + it * ROW_STEP;
            if (ROWS % ROW_STEP != 0 && row >= ROWS) break;
            const bool inside = row < rows_left && c < cols_left;
            cp_async4(s + c * LD + row, inside ? src + it * ROW_STEP * ld + col_shift : src, inside);
        }
    }
};

// What rungs 12 and 13 share: a thread's place in its warp's tile, its reads of one k-step's fragments and that
// k-step's FFMAs, and its store.
template <int BN, int WM, int WN, int WMITER, int WNITER, int TM, int TN>
struct TransposedWarpTile {
    static constexpr int WSUBM = WM / WMITER, WSUBN = WN / WNITER, LC = WSUBN / TN;
    static constexpr int AF = WMITER * TM / 4, BF = WNITER * TN / 4;  // float4s of A and of B per k-step
    static_assert((WSUBM / TM) * LC == 32, "a warp sub-tile holds exactly 32 thread tiles");
    static_assert(TM % 4 == 0 && TN % 4 == 0, "fragments are float4s");
    int wrow, wcol;  // this thread's first row and column in the block tile (+ wm·WSUBM + i, + wn·WSUBN + j)

    __device__ __forceinline__ TransposedWarpTile() {
        const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
        wrow = (warp / (BN / WN)) * WM + (lane / LC) * TM;
        wcol = (warp % (BN / WN)) * WN + (lane % LC) * TN;
    }

    // One k-step's fragments (`as`, `bs`: that k-step's row of the transposed A tile and of the B tile).
    __device__ __forceinline__ void read(float4 (&a)[AF], float4 (&b)[BF], const float* as, const float* bs) const {
#pragma unroll
        for (int wm = 0; wm < WMITER; ++wm)
#pragma unroll
            for (int i = 0; i < TM / 4; ++i) a[wm * (TM / 4) + i] = lds4(as + wrow + wm * WSUBM + i * 4);
#pragma unroll
        for (int wn = 0; wn < WNITER; ++wn)
#pragma unroll
            for (int j = 0; j < TN / 4; ++j) b[wn * (TN / 4) + j] = lds4(bs + wcol + wn * WSUBN + j * 4);
    }

    // acc += one k-step's outer product, column by column: one value of B meets this thread's values of A in turn.
    static __device__ __forceinline__ void multiply(float (&acc)[4 * AF][4 * BF], const float4 (&a)[AF],
                                                    const float4 (&b)[BF]) {
#pragma unroll
        for (int j = 0; j < BF; ++j)
#pragma unroll
            for (int c = 0; c < 4; ++c) {
                const float bj = component(b[j], c);
#pragma unroll
                for (int i = 0; i < AF; ++i) {
                    acc[4 * i + 0][4 * j + c] += a[i].x * bj;
                    acc[4 * i + 1][4 * j + c] += a[i].y * bj;
                    acc[4 * i + 2][4 * j + c] += a[i].z * bj;
                    acc[4 * i + 3][4 * j + c] += a[i].w * bj;
                }
            }
    }

    template <bool VEC>
    __device__ __forceinline__ void store(float* C, const float (&acc)[4 * AF][4 * BF], int row0, int col0, int M,
                                          int N) const {
        store_thread_tile<TM, TN, WSUBM, 1, WSUBN, VEC>(C, acc, row0 + wrow, col0 + wcol, M, N);
    }
};

template <int BM, int BN, int BK, int WM, int WN, int WMITER, int WNITER, int TM, int TN, int STAGES, int GROUP,
          int MIN_BLOCKS, bool VEC>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32, MIN_BLOCKS)
sgemm_async_transpose(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B,
                      float* __restrict__ C) {
    using Tile = TransposedWarpTile<BN, WM, WN, WMITER, WNITER, TM, TN>;
    constexpr int THREADS = (BM / WM) * (BN / WN) * 32, LDA = BM + 4;
    static_assert(STAGES >= 2, "at least double buffering");
    static_assert(BK % 2 == 0, "a tile's last k-step reads the next tile's first fragments into buffer 0");
    extern __shared__ float4 smem[];
    float* As = reinterpret_cast<float*>(smem);  // [STAGES][BK][LDA], transposed
    float* Bs = As + STAGES * BK * LDA;          // [STAGES][BK][BN]

    const int2 origin = grouped_tile_origin<BM, BN, GROUP>(M, N);
    const int row0 = origin.x, col0 = origin.y;
    const Tile tile;
    const int ktiles = CEIL_DIV(K, BK);

    const TransposedTileCopy<BM, BK, THREADS, LDA> copy_a(A, row0, 0, K);
    const TileCopy<BK, BN, THREADS, BN, VEC> copy_b(B, 0, col0, N);
    auto issue = [&](int kt) {
        if (kt < ktiles) {
            const int stage = kt % STAGES;
            copy_a.issue(As + stage * BK * LDA, kt * BK, M - row0, K - kt * BK);
            copy_b.issue(Bs + stage * BK * BN, kt * BK, 0, K - kt * BK, N - col0);
        }
        cp_async_commit();  // an empty group past the end keeps the wait count uniform
    };

#pragma unroll
    for (int kt = 0; kt < STAGES - 1; ++kt) issue(kt);
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    float4 a[2][Tile::AF], b[2][Tile::BF];  // [k-step % 2]
    tile.read(a[0], b[0], As, Bs);

    float acc[4 * Tile::AF][4 * Tile::BF] = {};
    for (int kt = 0; kt < ktiles; ++kt) {
        issue(kt + STAGES - 1);  // into the buffer tile kt - 1 used (everyone left it at the last barrier)
        const float* as = As + (kt % STAGES) * BK * LDA;
        const float* bs = Bs + (kt % STAGES) * BK * BN;
#pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
            if (kk < BK - 1) {
                tile.read(a[(kk + 1) % 2], b[(kk + 1) % 2], as + (kk + 1) * LDA, bs + (kk + 1) * BN);
            } else if (kt + 1 < ktiles) {  // the same for every thread of the block
                cp_async_wait<STAGES - 2>();  // tile kt + 1 has landed (for this thread) ...
                __syncthreads();              // ... for every thread, and nobody reads tile kt any more
                const int next = (kt + 1) % STAGES;
                tile.read(a[0], b[0], As + next * BK * LDA, Bs + next * BK * BN);
            }
            Tile::multiply(acc, a[kk % 2], b[kk % 2]);
        }
    }
    tile.template store<VEC>(C, acc, row0, col0, M, N);
}

// Rung 13 — rung 12 without a block-wide barrier in its main loop (mbarriers split each hand-over in two),
// and with its copies lean where no bounds need testing.
//  * Rung 12 waits at __syncthreads once per k-tile: every warp stops until the slowest arrives, and with two warps
//    per scheduler that skew costs issue slots. Smaller k-tiles (BK = 8, cuBLAS's) pay it four times as often.
//  * Here each stage has two mbarriers. full[s]: every thread's cp.async copies into stage s have landed (each
//    thread's copies arrive on it as they complete, cp.async.mbarrier.arrive.noinc). empty[s]: every thread has
//    read its last fragment of stage s. A thread arrives on empty as soon as it leaves a stage and waits on full
//    only for the next stage, so it waits for the others only when one is a whole stage behind.
//  * A thread refills a stage half-way through the next k-tile, not at its start: by then every thread has left
//    it (it waits on empty first, but the slack is half a k-tile), and the copy still has STAGES - 1.5 k-tiles to
//    land.
//  * A k-tile that lies wholly inside the matrix (every one but the edges') is copied without bounds tests: rung 12
//    spends several instructions per cp.async on its predicate and source address, and this kernel is bound by
//    instruction issue.
//  * Everything else (A transposed by 4-byte cp.async, fragments double-buffered in registers, FFMAs column by
//    column, grouped block order, zero-filled edges) is rung 12's kernel.
#include "12_async_transpose.cu"

#include "mbarrier.cuh"

// This thread's cp.async copies issued so far arrive on the barrier as they complete (one of its arrivals).
__device__ __forceinline__ void barrier_arrive_copies(unsigned long long* barrier) {
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(shared_address(barrier)) : "memory");
}

// Rung 12's copies of a k-tile that lies wholly inside the matrix: nothing to test, so little to issue.
template <int ROWS, int COLS, int THREADS, int LD>
__device__ __forceinline__ void issue_inside(const TransposedTileCopy<ROWS, COLS, THREADS, LD>& copy, float* s,
                                             int col_shift) {
    using Copy = TransposedTileCopy<ROWS, COLS, THREADS, LD>;
#pragma unroll
    for (int it = 0; it < Copy::ITERS; ++it) {
        const int row = copy.r + it * Copy::ROW_STEP;
        if (ROWS % Copy::ROW_STEP != 0 && row >= ROWS) break;
        cp_async4(s + copy.c * LD + row, copy.src + it * Copy::ROW_STEP * copy.ld + col_shift, true);
    }
}

template <int ROWS, int COLS, int THREADS, int LD, bool VEC>
__device__ __forceinline__ void issue_inside(const TileCopy<ROWS, COLS, THREADS, LD, VEC>& copy, float* s,
                                             int row_shift) {
    using Copy = TileCopy<ROWS, COLS, THREADS, LD, VEC>;
    const float* g = copy.src + row_shift * copy.ld;
#pragma unroll
    for (int it = 0; it < Copy::ITERS; ++it) {
        const int row = copy.r + it * Copy::ROW_STEP;
        if (ROWS % Copy::ROW_STEP != 0 && row >= ROWS) break;
        if (VEC) {
            cp_async16(s + row * LD + copy.c, g + it * Copy::ROW_STEP * copy.ld, true);
        } else {
#pragma unroll
            for (int e = 0; e < 4; ++e)
                cp_async4(s + row * LD + copy.c + e, g + it * Copy::ROW_STEP * copy.ld + e, true);
        }
    }
}

template <int BM, int BN, int BK, int WM, int WN, int WMITER, int WNITER, int TM, int TN, int STAGES, int GROUP,
          int MIN_BLOCKS, bool VEC>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32, MIN_BLOCKS)
sgemm_split_barriers(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B,
                     float* __restrict__ C) {
    using Tile = TransposedWarpTile<BN, WM, WN, WMITER, WNITER, TM, TN>;
    constexpr int THREADS = (BM / WM) * (BN / WN) * 32, LDA = BM + 4;
    static_assert(STAGES >= 2, "at least double buffering");
    static_assert(BK % 2 == 0, "a tile's last k-step reads the next tile's first fragments into buffer 0");
    extern __shared__ float4 smem[];
    float* As = reinterpret_cast<float*>(smem);  // [STAGES][BK][LDA], transposed
    float* Bs = As + STAGES * BK * LDA;          // [STAGES][BK][BN]
    unsigned long long* full = reinterpret_cast<unsigned long long*>(Bs + STAGES * BK * BN);  // BK even: aligned
    unsigned long long* empty = full + STAGES;

    const int2 origin = grouped_tile_origin<BM, BN, GROUP>(M, N);
    const int row0 = origin.x, col0 = origin.y;
    const Tile tile;
    const int ktiles = CEIL_DIV(K, BK);
    const bool a_inside = row0 + BM <= M, b_inside = col0 + BN <= N;  // this block's rows of A, columns of B

    if (threadIdx.x < STAGES) {
        barrier_init(full + threadIdx.x, THREADS);
        barrier_init(empty + threadIdx.x, THREADS);
    }
    __syncthreads();

    const TransposedTileCopy<BM, BK, THREADS, LDA> copy_a(A, row0, 0, K);
    const TileCopy<BK, BN, THREADS, BN, VEC> copy_b(B, 0, col0, N);
    auto issue = [&](int kt) {  // k-tile kt into stage kt % STAGES, once every thread has left that stage
        if (kt < ktiles) {
            const int stage = kt % STAGES;
            if (kt >= STAGES) barrier_wait(empty + stage, (kt / STAGES + 1) % 2);
            const bool k_inside = (kt + 1) * BK <= K;
            if (k_inside && a_inside) {
                issue_inside(copy_a, As + stage * BK * LDA, kt * BK);
            } else {
                copy_a.issue(As + stage * BK * LDA, kt * BK, M - row0, K - kt * BK);
            }
            if (k_inside && b_inside) {
                issue_inside(copy_b, Bs + stage * BK * BN, kt * BK);
            } else {
                copy_b.issue(Bs + stage * BK * BN, kt * BK, 0, K - kt * BK, N - col0);
            }
            barrier_arrive_copies(full + stage);
        }
    };

#pragma unroll
    for (int kt = 0; kt < STAGES - 1; ++kt) issue(kt);
    barrier_wait(full, 0);
    float4 a[2][Tile::AF], b[2][Tile::BF];  // [k-step % 2]
    tile.read(a[0], b[0], As, Bs);

    float acc[4 * Tile::AF][4 * Tile::BF] = {};
    for (int kt = 0; kt < ktiles; ++kt) {
        const int stage = kt % STAGES;
        const float* as = As + stage * BK * LDA;
        const float* bs = Bs + stage * BK * BN;
#pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
            if (kk == BK / 2) issue(kt + STAGES - 1);  // into the stage tile kt - 1 used
            if (kk < BK - 1) {
                tile.read(a[(kk + 1) % 2], b[(kk + 1) % 2], as + (kk + 1) * LDA, bs + (kk + 1) * BN);
            } else {
                barrier_arrive(empty + stage);  // this thread's last fragments of the stage are in registers
                if (kt + 1 < ktiles) {
                    const int next = (kt + 1) % STAGES;
                    barrier_wait(full + next, (kt + 1) / STAGES % 2);
                    tile.read(a[0], b[0], As + next * BK * LDA, Bs + next * BK * BN);
                }
            }
            Tile::multiply(acc, a[kk % 2], b[kk % 2]);
        }
    }
    tile.template store<VEC>(C, acc, row0, col0, M, N);
}

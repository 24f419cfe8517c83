// Rung 4: the fused b2b product for narrow shapes (K0, N0, N1 ≤ 64), B0 and B1 resident in shared memory (TF32).
//  * Rung 2's mma.sync tiles, but a block loads B0 and B1 once and then streams 64-row tiles of A0: tiles blockIdx.x,
//    blockIdx.x + gridDim.x, … with two blocks per SM persisting. Rung 2's blocks load both for every 64 rows of D (as
//    much traffic again as A0's at these widths) and wait for every load.
//  * The next tile of A0 is copied (cp.async) while this one is multiplied, so streaming A0 overlaps the products,
//    which at these widths are short; the bound is the traffic of A0 and D, half the unfused pair's.
//  * D is stored from the accumulators: each warp's store covers 8 rows × 8 consecutive floats, whole 32-byte sectors.
#include "02_fused_mma.cu"

constexpr int RESIDENT = 64;  // capacity of K0, N0 and N1

template <bool VEC>
__device__ __forceinline__ void store_d(const MmaTile<BM, RESIDENT>& d, float* D, int row0, int M, int N1) {
    const int g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
#pragma unroll
    for (int j = 0; j < MmaTile<BM, RESIDENT>::TILES; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int r = row0 + d.row0() + g + 8 * h, c = d.col0() + 8 * j + 2 * t;
            if (r >= M || c >= N1) continue;
            float* dst = D + static_cast<long long>(r) * N1 + c;
            if (VEC) {  // N1 a multiple of 4: c + 1 < N1 too
                *reinterpret_cast<float2*>(dst) = make_float2(d.acc[j][2 * h], d.acc[j][2 * h + 1]);
            } else {
                dst[0] = d.acc[j][2 * h];
                if (c + 1 < N1) dst[1] = d.acc[j][2 * h + 1];
            }
        }
}

template <bool VEC>
__global__ void __launch_bounds__(THREADS, 2) b2b_fused_resident(int M, int K0, int N0, int N1, const float* A0,
                                                                 const float* B0, const float* B1, float* D) {
    constexpr int LDA = RESIDENT + PAD, LDB = RESIDENT + PAD_B, LDI = RESIDENT + PAD;
    extern __shared__ __align__(128) float smem[];
    float* b0s = smem;                    // RESIDENT × LDB
    float* b1s = b0s + RESIDENT * LDB;    // RESIDENT × LDB
    float* slice = b1s + RESIDENT * LDB;  // BM × LDI: A1's rows of the tile
    float* as = slice + BM * LDI;         // 2 stages × BM × LDA
    const int tiles = CEIL_DIV(M, BM);

    // Outside K0, N0 and N1 the copies zero-fill, so the products over the full capacity are exact.
    load_async<RESIDENT, RESIDENT, LDB, VEC>(b0s, B0, 0, 0, K0, N0, N0);
    load_async<RESIDENT, RESIDENT, LDB, VEC>(b1s, B1, 0, 0, N0, N1, N1);
    load_async<BM, RESIDENT, LDA, VEC>(as, A0, blockIdx.x * BM, 0, M, K0, K0);
    cp_async_commit();
    int stage = 0;
    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x, stage ^= 1) {
        // into the buffer of the tile before, which every thread left at the last barrier
        load_async<BM, RESIDENT, LDA, VEC>(as + (stage ^ 1) * BM * LDA, A0, (tile + gridDim.x) * BM, 0, M, K0, K0);
        cp_async_commit();
        cp_async_wait<1>();
        __syncthreads();
        MmaTile<BM, RESIDENT> a1;
        a1.zero();
#pragma unroll
        for (int c = 0; c < RESIDENT / BK; ++c)
            a1.step(as + stage * BM * LDA + c * BK, LDA, b0s + c * BK * LDB, LDB);
        a1.store(slice, LDI);
        __syncthreads();
        MmaTile<BM, RESIDENT> d;
        d.zero();
#pragma unroll
        for (int c = 0; c < RESIDENT / BK; ++c) d.step(slice + c * BK, LDI, b1s + c * BK * LDB, LDB);
        store_d<VEC>(d, D, tile * BM, M, N1);
        __syncthreads();  // the slice and this stage's buffer are written next
    }
}

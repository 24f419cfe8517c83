// dev: rung 4 with STAGES tiles of A0 in flight and BLOCKS blocks per SM
#include "02_fused_mma.cu"

constexpr int RESIDENT = 64;

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
            if (VEC) {
                *reinterpret_cast<float2*>(dst) = make_float2(d.acc[j][2 * h], d.acc[j][2 * h + 1]);
            } else {
                dst[0] = d.acc[j][2 * h];
                if (c + 1 < N1) dst[1] = d.acc[j][2 * h + 1];
            }
        }
}

template <int STAGES, int BLOCKS, bool VEC>
__global__ void __launch_bounds__(THREADS, BLOCKS) staged(int M, int K0, int N0, int N1, const float* A0,
                                                          const float* B0, const float* B1, float* D) {
    constexpr int LDA = RESIDENT + PAD, LDB = RESIDENT + PAD_B, LDI = RESIDENT + PAD;
    extern __shared__ __align__(128) float smem[];
    float* b0s = smem;
    float* b1s = b0s + RESIDENT * LDB;
    float* slice = b1s + RESIDENT * LDB;
    float* as = slice + BM * LDI;  // STAGES × BM × LDA
    const int tiles = CEIL_DIV(M, BM);
    load_async<RESIDENT, RESIDENT, LDB, VEC>(b0s, B0, 0, 0, K0, N0, N0);
    load_async<RESIDENT, RESIDENT, LDB, VEC>(b1s, B1, 0, 0, N0, N1, N1);
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        load_async<BM, RESIDENT, LDA, VEC>(as + s * BM * LDA, A0, (blockIdx.x + s * gridDim.x) * BM, 0, M, K0, K0);
        cp_async_commit();
    }
    int stage = 0;
    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        const int refill = stage == 0 ? STAGES - 1 : stage - 1;
        load_async<BM, RESIDENT, LDA, VEC>(as + refill * BM * LDA, A0, (tile + (STAGES - 1) * gridDim.x) * BM, 0, M,
                                           K0, K0);
        cp_async_commit();
        cp_async_wait<STAGES - 1>();
        __syncthreads();
        MmaTile<BM, RESIDENT> a1;
        a1.zero();
#pragma unroll
        for (int c = 0; c < RESIDENT / BK; ++c) a1.step(as + stage * BM * LDA + c * BK, LDA, b0s + c * BK * LDB, LDB);
        a1.store(slice, LDI);
        __syncthreads();
        MmaTile<BM, RESIDENT> d;
        d.zero();
#pragma unroll
        for (int c = 0; c < RESIDENT / BK; ++c) d.step(slice + c * BK, LDI, b1s + c * BK * LDB, LDB);
        store_d<VEC>(d, D, tile * BM, M, N1);
        __syncthreads();
        stage = stage == STAGES - 1 ? 0 : stage + 1;
    }
}

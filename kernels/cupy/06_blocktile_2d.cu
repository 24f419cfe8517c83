// Rung 6 — 2-D block tiling with register tiles: each of the (BM/TM)·(BN/TN) threads computes a TM×TN tile
// of C as outer products of TM values of A and TN values of B held in registers: TM·TN FMAs for TM + TN
// shared-memory loads. Arithmetic intensity per thread now grows with the register tile.
#include "common.cuh"

template <int BM, int BN, int BK, int TM, int TN>
__global__ void __launch_bounds__((BM / TM) * (BN / TN))
sgemm_blocktile_2d(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C) {
    constexpr int THREADS = (BM / TM) * (BN / TN);
    __shared__ float As[BM * BK], Bs[BK * BN];
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int thread_col = threadIdx.x % (BN / TN), thread_row = threadIdx.x / (BN / TN);
    float acc[TM][TN] = {}, a[TM], b[TN];
    for (int k0 = 0; k0 < K; k0 += BK) {
        load_tile<BM, BK, THREADS, BK>(As, A, row0, k0, M, K, K);
        load_tile<BK, BN, THREADS, BN>(Bs, B, k0, col0, K, N, N);
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
#pragma unroll
            for (int i = 0; i < TM; ++i) a[i] = As[(thread_row * TM + i) * BK + k];
#pragma unroll
            for (int j = 0; j < TN; ++j) b[j] = Bs[k * BN + thread_col * TN + j];
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] += a[i] * b[j];
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            const int row = row0 + thread_row * TM + i, col = col0 + thread_col * TN + j;
            if (row < M && col < N) C[row * N + col] = acc[i][j];
        }
}

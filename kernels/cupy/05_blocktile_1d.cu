// Rung 5 — 1-D block tiling: a block computes a BM×BN tile of C with BM·BN/TM threads, each thread a column
// of TM outputs. The value of B a thread reads from shared memory is reused TM times from a register, so
// shared-memory loads per FMA fall from 2 to (1 + TM)/TM.
#include "common.cuh"

template <int BM, int BN, int BK, int TM>
__global__ void __launch_bounds__(BM * BN / TM)
sgemm_blocktile_1d(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C) {
    constexpr int THREADS = BM * BN / TM;
    __shared__ float As[BM * BK], Bs[BK * BN];
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int thread_col = threadIdx.x % BN, thread_row = threadIdx.x / BN;
    float acc[TM] = {};
    for (int k0 = 0; k0 < K; k0 += BK) {
        load_tile<BM, BK, THREADS, BK>(As, A, row0, k0, M, K, K);
        load_tile<BK, BN, THREADS, BN>(Bs, B, k0, col0, K, N, N);
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            const float b = Bs[k * BN + thread_col];
#pragma unroll
            for (int i = 0; i < TM; ++i) acc[i] += As[(thread_row * TM + i) * BK + k] * b;
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int row = row0 + thread_row * TM + i, col = col0 + thread_col;
        if (row < M && col < N) C[row * N + col] = acc[i];
    }
}

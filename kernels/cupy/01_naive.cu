// Rung 1 — naive: one thread per element of C.
// threadIdx.x walks down a column of C, so the 32 threads of a warp read 32 rows of A that are K floats apart
// and write C N floats apart: no access coalesces, and every operand comes from global memory (or L1/L2).
#include "common.cuh"

template <int BX, int BY>
__global__ void __launch_bounds__(BX * BY)
sgemm_naive(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C) {
    const int row = blockIdx.x * BX + threadIdx.x;
    const int col = blockIdx.y * BY + threadIdx.y;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
    C[row * N + col] = acc;
}

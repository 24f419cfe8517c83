// Rung 2 — global-memory coalescing: the same arithmetic as rung 1, but threadIdx.x now walks along a row of C.
// A warp reads one element of A (a broadcast) and 32 consecutive floats of B, and writes 32 consecutive
// floats of C: every access is one 128-byte transaction instead of 32.
#include "common.cuh"

template <int BX, int BY>
__global__ void __launch_bounds__(BX * BY)
sgemm_coalesced(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C) {
    const int col = blockIdx.x * BX + threadIdx.x;
    const int row = blockIdx.y * BY + threadIdx.y;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
    C[row * N + col] = acc;
}

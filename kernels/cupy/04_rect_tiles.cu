// Rung 4 — rectangular tiles: each thread computes two outputs, TILE columns apart, from one tile of A and
// two tiles of B. Every value of A read from shared memory now feeds two FMAs, and the block covers a
// TILE×2·TILE tile of C with the same number of threads.
#include "common.cuh"

template <int TILE>
__global__ void __launch_bounds__(TILE * TILE)
sgemm_rect_tiles(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C) {
    __shared__ float As[TILE][TILE], Bs[2][TILE][TILE];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE + ty, col = blockIdx.x * 2 * TILE + tx;
    float acc0 = 0.0f, acc1 = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        As[ty][tx] = load_or_zero(A, row, k0 + tx, M, K, K);
        Bs[0][ty][tx] = load_or_zero(B, k0 + ty, col, K, N, N);
        Bs[1][ty][tx] = load_or_zero(B, k0 + ty, col + TILE, K, N, N);
        __syncthreads();
#pragma unroll
        for (int k = 0; k < TILE; ++k) {
            const float a = As[ty][k];
            acc0 += a * Bs[0][k][tx];
            acc1 += a * Bs[1][k][tx];
        }
        __syncthreads();
    }
    if (row < M && col < N) C[row * N + col] = acc0;
    if (row < M && col + TILE < N) C[row * N + col + TILE] = acc1;
}

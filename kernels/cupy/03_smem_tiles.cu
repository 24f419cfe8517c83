// Rung 3 — shared-memory square tiles: a TILE×TILE block stages one TILE×TILE tile of A and of B in shared
// memory (one element per thread, zero outside the matrix), then every thread reads TILE values of each from
// shared memory. Global traffic drops by TILE×; two barriers per tile keep loads and reads apart.
#include "common.cuh"

template <int TILE>
__global__ void __launch_bounds__(TILE * TILE)
sgemm_smem_tiles(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C) {
    __shared__ float As[TILE][TILE], Bs[TILE][TILE];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE + ty, col = blockIdx.x * TILE + tx;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        As[ty][tx] = load_or_zero(A, row, k0 + tx, M, K, K);
        Bs[ty][tx] = load_or_zero(B, k0 + ty, col, K, N, N);
        __syncthreads();
#pragma unroll
        for (int k = 0; k < TILE; ++k) acc += As[ty][k] * Bs[k][tx];
        __syncthreads();
    }
    if (row < M && col < N) C[row * N + col] = acc;
}

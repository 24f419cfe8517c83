// Rung 1: the fused b2b product on FP32 FFMA. A thread owns a (BM/16)×(NP/16) register tile: rows ty + 16·i,
// columns tx + 16·j (a warp reads two rows of A, broadcast, and 16 consecutive columns of B: no bank conflicts).
#include "fused.cuh"

template <int ROWS, int NP>
struct SimtTile {
    static constexpr int TM = ROWS / 16, TN = NP / 16;
    float acc[TM][TN];

    __device__ __forceinline__ void zero() {
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
            for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;
    }

    __device__ __forceinline__ void step(const float* a, int lda, const float* b, int ldb) {
        const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
#pragma unroll 4
        for (int k = 0; k < BK; ++k) {
            float ar[TM], br[TN];
#pragma unroll
            for (int i = 0; i < TM; ++i) ar[i] = a[(ty + 16 * i) * lda + k];
#pragma unroll
            for (int j = 0; j < TN; ++j) br[j] = b[k * ldb + tx + 16 * j];
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(ar[i], br[j], acc[i][j]);
        }
    }

    __device__ __forceinline__ void store(float* s, int lds) const {
        const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
            for (int j = 0; j < TN; ++j) s[(ty + 16 * i) * lds + tx + 16 * j] = acc[i][j];
    }
};

template <int NP0, int NP1, bool VEC>
__global__ void __launch_bounds__(THREADS, min_blocks(NP0, NP1)) b2b_fused_simt(int M, int K0, int N0, int N1,
                                                                                const float* A0, const float* B0,
                                                                                const float* B1, float* D) {
    b2b_fused<SimtTile, NP0, NP1, VEC>(M, K0, N0, N1, A0, B0, B1, D);
}

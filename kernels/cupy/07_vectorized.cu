// Rung 7 — vectorised 16-byte loads, A transposed in shared memory: global loads of A and B are float4s, and A
// is stored k-major (As[k][m]) so that a thread's TM values of A at one k are consecutive: the inner loop reads
// A and B with 16-byte shared loads (LDS.128), a quarter of the load instructions of rung 6.
// VEC = false is the same kernel with element loads, for K or N not a multiple of 4 (unaligned rows).
#include "common.cuh"

template <int BM>
struct TransposedA {  // As[k][m]
    static __device__ __forceinline__ int at(int k, int m) { return k * BM + m; }
};

// The block-tiled body with vector loads; LAYOUT places the transposed A tile in shared memory.
template <int BM, int BN, int BK, int TM, int TN, class LAYOUT, bool VEC>
__device__ __forceinline__ void vectorized_blocktile(int M, int N, int K, const float* __restrict__ A,
                                                     const float* __restrict__ B, float* __restrict__ C) {
    static_assert(TM % 4 == 0 && TN % 4 == 0 && BK % 4 == 0, "register tiles and BK are read as float4s");
    constexpr int THREADS = (BM / TM) * (BN / TN);
    __shared__ __align__(16) float As[BK * BM], Bs[BK * BN];
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int thread_col = threadIdx.x % (BN / TN), thread_row = threadIdx.x / (BN / TN);
    float acc[TM][TN] = {}, a[TM], b[TN];
    for (int k0 = 0; k0 < K; k0 += BK) {
        load_tile4_transposed<BM, BK, THREADS, LAYOUT, VEC>(As, A, row0, k0, M, K, K);
        load_tile4<BK, BN, THREADS, BN, VEC>(Bs, B, k0, col0, K, N, N);
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
#pragma unroll
            for (int i = 0; i < TM; i += 4) {
                const float4 v = lds4(As + LAYOUT::at(k, thread_row * TM + i));
                a[i] = v.x, a[i + 1] = v.y, a[i + 2] = v.z, a[i + 3] = v.w;
            }
#pragma unroll
            for (int j = 0; j < TN; j += 4) {
                const float4 v = lds4(Bs + k * BN + thread_col * TN + j);
                b[j] = v.x, b[j + 1] = v.y, b[j + 2] = v.z, b[j + 3] = v.w;
            }
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
        for (int j = 0; j < TN; j += 4)
            store4<VEC>(C, row0 + thread_row * TM + i, col0 + thread_col * TN + j, M, N, N,
                        make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]));
}

template <int BM, int BN, int BK, int TM, int TN, bool VEC>
__global__ void __launch_bounds__((BM / TM) * (BN / TN))
sgemm_vectorized(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C) {
    vectorized_blocktile<BM, BN, BK, TM, TN, TransposedA<BM>, VEC>(M, N, K, A, B, C);
}

// Rung 8 — shared-memory bank conflicts avoided by a swizzle. In rung 7 the threads that store the transposed
// A tile write As[k][m] for k = c..c+3 of their float4; threads with different c but the same m hit the same
// bank (rows of BM floats, BM a multiple of 32): a BK/4-way conflict on every store. XOR-ing m with a multiple
// of 32/(BK/4) chosen by k/4 spreads them over all 32 banks. The XOR leaves the low two bits of m alone, so a
// float4 of four consecutive m stays contiguous and aligned for the LDS.128 reads. No padding, no extra memory.
#include "07_vectorized.cu"

template <int BM, int BK>
struct SwizzledA {  // As[k][m ^ f(k)]
    static_assert(BK == 4 || BK == 8 || BK == 16 || BK == 32, "the swizzle needs BK/4 a power of two up to 8");
    static __device__ __forceinline__ int at(int k, int m) { return k * BM + (m ^ (((k >> 2) & (BK / 4 - 1)) * (32 / (BK / 4)))); }
};

template <int BM, int BN, int BK, int TM, int TN, bool VEC>
__global__ void __launch_bounds__((BM / TM) * (BN / TN))
sgemm_bank_conflicts(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C) {
    vectorized_blocktile<BM, BN, BK, TM, TN, SwizzledA<BM, BK>, VEC>(M, N, K, A, B, C);
}

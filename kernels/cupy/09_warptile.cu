// Rung 9 — warp tiling: block tile → warp tiles (WM×WN) → thread tiles. Each warp covers WMITER×WNITER
// sub-tiles; in each, its 32 lanes form a (WSUBM/TM)×(WSUBN/TN) grid of TM×TN thread tiles. A warp's lanes now
// read a few consecutive float4s of A and B (broadcast, no bank conflicts), the A and B fragments a lane loads
// are reused across the sub-tiles from registers, and a warp's working set stays in one region of shared memory.
#include "08_bank_conflicts.cu"

template <int BM, int BN, int BK, int WM, int WN, int WMITER, int WNITER, int TM, int TN, bool VEC>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32)
sgemm_warptile(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C) {
    constexpr int THREADS = (BM / WM) * (BN / WN) * 32;
    constexpr int WSUBM = WM / WMITER, WSUBN = WN / WNITER, LC = WSUBN / TN;
    static_assert((WSUBM / TM) * LC == 32, "a warp sub-tile holds exactly 32 thread tiles");
    static_assert(TM % 4 == 0 && TN % 4 == 0, "thread tiles are read as float4s");
    using LayoutA = SwizzledA<BM, BK>;
    __shared__ __align__(16) float As[BK * BM], Bs[BK * BN];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int wrow = (warp / (BN / WN)) * WM, wcol = (warp % (BN / WN)) * WN;
    const int lrow = (lane / LC) * TM, lcol = (lane % LC) * TN;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    float acc[WMITER * TM][WNITER * TN] = {}, a[WMITER * TM], b[WNITER * TN];
    for (int k0 = 0; k0 < K; k0 += BK) {
        load_tile4_transposed<BM, BK, THREADS, LayoutA, VEC>(As, A, row0, k0, M, K, K);
        load_tile4<BK, BN, THREADS, BN, VEC>(Bs, B, k0, col0, K, N, N);
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
#pragma unroll
            for (int wm = 0; wm < WMITER; ++wm)
#pragma unroll
                for (int i = 0; i < TM; i += 4) {
                    const float4 v = lds4(As + LayoutA::at(k, wrow + wm * WSUBM + lrow + i));
                    float* dst = a + wm * TM + i;
                    dst[0] = v.x, dst[1] = v.y, dst[2] = v.z, dst[3] = v.w;
                }
#pragma unroll
            for (int wn = 0; wn < WNITER; ++wn)
#pragma unroll
                for (int j = 0; j < TN; j += 4) {
                    const float4 v = lds4(Bs + k * BN + wcol + wn * WSUBN + lcol + j);
                    float* dst = b + wn * TN + j;
                    dst[0] = v.x, dst[1] = v.y, dst[2] = v.z, dst[3] = v.w;
                }
#pragma unroll
            for (int i = 0; i < WMITER * TM; ++i)
#pragma unroll
                for (int j = 0; j < WNITER * TN; ++j) acc[i][j] += a[i] * b[j];
        }
        __syncthreads();
    }
    store_thread_tile<TM, TN, WSUBM, 1, WSUBN, VEC>(C, acc, row0 + wrow + lrow, col0 + wcol + lcol, M, N);
}

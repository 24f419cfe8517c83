// Rung 3: the fused b2b product on FP32 FFMA with the CuPy ladder's float4 warp-tile inner loop (rung 10).
//  * The 8 warps split a ROWS×NP product 2 × 4: a warp owns ROWS/2 rows and NP/4 columns; its lanes form 8 × 4
//    thread tiles of 4 rows × NP/16 columns (16 accumulators at NP = 64, 64 at NP = 256).
//  * A thread's rows are 8 apart (interleaved), read along k as float4s: the A-side rows (A0's chunk, then the A1
//    slice) have a stride ≡ 4 floats mod 32 banks with an odd count of float4s, so the 8 rows a warp reads at once
//    land in distinct bank groups. Its columns are float4s 16 apart: the 4 lanes of a warp row read 16 consecutive
//    floats of B, broadcast to the 8 warp rows. One k-step: 4 + NP/16 float4 loads in 4 (rung 1: 4 + NP/16 scalar
//    loads in every k-step) for 4·NP/16 FFMAs per thread.
#include "fused.cuh"

template <int ROWS, int NP>
struct WarpTile {
    static constexpr int WM = ROWS / 2, WN = NP / 4, LR = 8, LC = 4, TM = WM / LR, TG = WN / (4 * LC);
    static_assert(TM == 4 && TG >= 1, "4 rows and whole float4 column groups per thread");
    float acc[TM][TG][4];

    __device__ __forceinline__ int row(int i) const {
        const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
        return (warp / 4) * WM + lane / LC + i * LR;
    }

    __device__ __forceinline__ int col(int g) const {
        const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
        return (warp % 4) * WN + (lane % LC) * 4 + g * 4 * LC;
    }

    __device__ __forceinline__ void zero() {
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
            for (int g = 0; g < TG; ++g)
#pragma unroll
                for (int e = 0; e < 4; ++e) acc[i][g][e] = 0.0f;
    }

    __device__ __forceinline__ void step(const float* a, int lda, const float* b, int ldb) {
#pragma unroll 2
        for (int k4 = 0; k4 < BK; k4 += 4) {
            float4 ar[TM];
#pragma unroll
            for (int i = 0; i < TM; ++i) ar[i] = *reinterpret_cast<const float4*>(a + row(i) * lda + k4);
#pragma unroll
            for (int kk = 0; kk < 4; ++kk) {
                float4 br[TG];
#pragma unroll
                for (int g = 0; g < TG; ++g) br[g] = *reinterpret_cast<const float4*>(b + (k4 + kk) * ldb + col(g));
#pragma unroll
                for (int i = 0; i < TM; ++i) {
                    const float ai = kk == 0 ? ar[i].x : kk == 1 ? ar[i].y : kk == 2 ? ar[i].z : ar[i].w;
#pragma unroll
                    for (int g = 0; g < TG; ++g) {
                        acc[i][g][0] = fmaf(ai, br[g].x, acc[i][g][0]);
                        acc[i][g][1] = fmaf(ai, br[g].y, acc[i][g][1]);
                        acc[i][g][2] = fmaf(ai, br[g].z, acc[i][g][2]);
                        acc[i][g][3] = fmaf(ai, br[g].w, acc[i][g][3]);
                    }
                }
            }
        }
    }

    __device__ __forceinline__ void store(float* s, int lds) const {
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
            for (int g = 0; g < TG; ++g)
                *reinterpret_cast<float4*>(s + row(i) * lds + col(g)) =
                    make_float4(acc[i][g][0], acc[i][g][1], acc[i][g][2], acc[i][g][3]);
    }
};

template <int NP0, int NP1, bool VEC>
__global__ void __launch_bounds__(THREADS, min_blocks(NP0, NP1)) b2b_fused_warptile(int M, int K0, int N0, int N1,
                                                                                    const float* A0,
                                                                                    const float* B0,
                                                                                    const float* B1, float* D) {
    b2b_fused<WarpTile, NP0, NP1, VEC>(M, K0, N0, N1, A0, B0, B1, D);
}

// Rung 2: the fused b2b product on TF32 tensor cores: mma.sync m16n8k8 (PTX, FP32 accumulate), operands rounded
// to TF32 (cvt.rna) as they leave shared memory. The 8 warps split a ROWS×NP product 4 × 2: a warp owns 16 rows
// and NP/2 columns, NP/16 accumulator tiles of 16×8. Fragment layouts: PTX ISA, "Matrix fragments for mma.m16n8k8".
#include "fused.cuh"

__device__ __forceinline__ unsigned to_tf32(float x) {
    unsigned r;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
    return r;
}

template <int ROWS, int NP>
struct MmaTile {
    static_assert(ROWS == 64, "4 warps of 16 rows");
    static constexpr int TILES = NP / 16;  // 8-column tiles per warp
    float acc[TILES][4];

    __device__ __forceinline__ void zero() {
#pragma unroll
        for (int j = 0; j < TILES; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[j][e] = 0.0f;
    }

    __device__ __forceinline__ int row0() const { return (threadIdx.x / 32 % 4) * 16; }
    __device__ __forceinline__ int col0() const { return (threadIdx.x / 32 / 4) * (NP / 2); }

    // With lda ≡ 4 and ldb ≡ 8 (mod 32) both fragment reads are free of bank conflicts.
    __device__ __forceinline__ void step(const float* a, int lda, const float* b, int ldb) {
        const int g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
        const float* ar = a + (row0() + g) * lda + t;
        const float* br = b + t * ldb + col0() + g;
#pragma unroll
        for (int k = 0; k < BK; k += 8) {
            const unsigned a0 = to_tf32(ar[k]), a1 = to_tf32(ar[8 * lda + k]);
            const unsigned a2 = to_tf32(ar[k + 4]), a3 = to_tf32(ar[8 * lda + k + 4]);
#pragma unroll
            for (int j = 0; j < TILES; ++j) {
                const unsigned b0 = to_tf32(br[k * ldb + 8 * j]), b1 = to_tf32(br[(k + 4) * ldb + 8 * j]);
                asm volatile(
                    "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                    "{%8, %9}, {%0, %1, %2, %3};\n"
                    : "+f"(acc[j][0]), "+f"(acc[j][1]), "+f"(acc[j][2]), "+f"(acc[j][3])
                    : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
            }
        }
    }

    __device__ __forceinline__ void store(float* s, int lds) const {
        const int g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
#pragma unroll
        for (int j = 0; j < TILES; ++j) {
            float* at = s + (row0() + g) * lds + col0() + 8 * j + 2 * t;
            *reinterpret_cast<float2*>(at) = make_float2(acc[j][0], acc[j][1]);
            *reinterpret_cast<float2*>(at + 8 * lds) = make_float2(acc[j][2], acc[j][3]);
        }
    }
};

template <int NP0, int NP1, bool VEC>
__global__ void __launch_bounds__(THREADS, min_blocks(NP0, NP1)) b2b_fused_mma(int M, int K0, int N0, int N1,
                                                                               const float* A0, const float* B0,
                                                                               const float* B1, float* D) {
    b2b_fused<MmaTile, NP0, NP1, VEC>(M, K0, N0, N1, A0, B0, B1, D);
}

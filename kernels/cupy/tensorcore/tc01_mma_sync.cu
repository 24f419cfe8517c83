// Tensor-core rung 1 — mma.sync with shared tiles (TF32, BF16).
//  * A BM×BK tile of A and a BK×BN tile of B are copied into shared memory, rounded to TF32 on the way
//    (cvt.rna, round to nearest, ties away: what the tensor cores then read unchanged).
//  * Each warp owns a WM×WN tile of C as (WM/16)×(WN/8) accumulators of mma.sync.m16n8k8 (4 floats a thread each)
//    and, per 8-deep k-step, reads its A and B fragments from shared memory with scalar loads in the layout the
//    PTX ISA gives for .tf32 fragments (no ldmatrix yet; the layout of the b2b kernel 02_fused_mma.cu). Row pads
//    (A's row ≡ 4, B's ≡ 8 floats mod 32 banks) make both TF32 reads free of bank conflicts.
//  * Global loads are scalar and bounds-checked, one barrier pair per k-tile: what later rungs improve on.
//  * BF16 (tc_mma_sync_bf16): the same tiles of bfloat16 with mma.m16n8k16, whose fragments hold pairs of k in the
//    same places: A's pair is one 32-bit word of a row, B's two rows of one column, packed. BK counts 4-byte words
//    along k (2·BK bfloat16), so both modes share parameters, checks and shared memory.
#include "../common.cuh"

__device__ __forceinline__ float to_tf32(float x) {
    unsigned int rounded;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(rounded) : "f"(x));
    return __uint_as_float(rounded);
}

template <bool BF16>
struct Bf16Operands {};

// acc[i][j] += a[i]·b[j] for the warp's FM×FN mma tiles: m16n8k8 TF32, or with Bf16Operands<true> m16n8k16 on bfloat16
// pairs (the same registers: 4 of A, 2 of B, 4 accumulators, in the same places of the 16×8 output tile).
template <int FM, int FN, bool BF16 = false>
__device__ __forceinline__ void mma_warp_tile(float (&acc)[FM][FN][4], const unsigned (&a)[FM][4],
                                              const unsigned (&b)[FN][2], Bf16Operands<BF16> = {}) {
#define MMA_OPERANDS                                                                                   \
    : "+f"(acc[i][j][0]), "+f"(acc[i][j][1]), "+f"(acc[i][j][2]), "+f"(acc[i][j][3])                  \
    : "r"(a[i][0]), "r"(a[i][1]), "r"(a[i][2]), "r"(a[i][3]), "r"(b[j][0]), "r"(b[j][1])
#pragma unroll
    for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int j = 0; j < FN; ++j) {
            if constexpr (BF16)
                asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                             "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n" MMA_OPERANDS);
            else
                asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
                             "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n" MMA_OPERANDS);
        }
#undef MMA_OPERANDS
}

template <class Element, int BM, int BN, int BK, int WM, int WN>
__device__ __forceinline__ void mma_sync_tiles(int M, int N, int K, const Element* __restrict__ A,
                                               const Element* __restrict__ B, float* __restrict__ C) {
    constexpr bool BF16 = sizeof(Element) == 2;
    constexpr int PER_WORD = 4 / sizeof(Element), KD = BK * PER_WORD;  // elements of k per tile
    constexpr int WARPS_N = BN / WN, THREADS = (BM / WM) * WARPS_N * 32, FM = WM / 16, FN = WN / 8;
    constexpr int LDA = KD + 4 * PER_WORD, LDB = BN + 8;  // the same bytes in both modes
    static_assert(BM % WM == 0 && BN % WN == 0 && WM % 16 == 0 && WN % 8 == 0 && BK % 8 == 0, "whole mma tiles");
    __shared__ __align__(16) Element As[BM * LDA];
    __shared__ __align__(16) Element Bs[KD * LDB];

    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int group = lane / 4, member = lane % 4;  // the PTX ISA's groupID and threadID_in_group
    const int warp_row = (warp / WARPS_N) * WM, warp_col = (warp % WARPS_N) * WN;
    auto stored = [](Element x) -> Element {  // TF32: rounded once, on the way in
        if constexpr (BF16) return x;
        else return to_tf32(x);
    };
    // A: a word of a row (TF32: one float; BF16: the pair k, k + 1); B: a column's (k, n) and, in BF16, (k + 1, n)
    auto word = [](const Element* p) -> unsigned {
        if constexpr (BF16) return *reinterpret_cast<const unsigned*>(p);
        else return __float_as_uint(*p);
    };
    auto column_word = [](const Element* p) -> unsigned {
        if constexpr (BF16) return p[0] | static_cast<unsigned>(p[LDB]) << 16;
        else return __float_as_uint(*p);
    };

    float acc[FM][FN][4] = {};
    for (int k0 = 0; k0 < K; k0 += KD) {
        for (int i = threadIdx.x; i < BM * KD; i += THREADS) {
            const int r = i / KD, c = i % KD, gr = row0 + r, gc = k0 + c;
            As[r * LDA + c] = gr < M && gc < K ? stored(A[gr * K + gc]) : Element(0);
        }
        for (int i = threadIdx.x; i < KD * BN; i += THREADS) {
            const int r = i / BN, c = i % BN, gr = k0 + r, gc = col0 + c;
            Bs[r * LDB + c] = gr < K && gc < N ? stored(B[gr * N + gc]) : Element(0);
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < KD; kk += 8 * PER_WORD) {
            unsigned int a[FM][4], b[FN][2];
#pragma unroll
            for (int i = 0; i < FM; ++i) {  // a0: (g, t), a1: (g + 8, t), a2: (g, t + 4), a3: (g + 8, t + 4) in words
                const Element* tile = As + (warp_row + i * 16 + group) * LDA + kk + member * PER_WORD;
                a[i][0] = word(tile);
                a[i][1] = word(tile + 8 * LDA);
                a[i][2] = word(tile + 4 * PER_WORD);
                a[i][3] = word(tile + 8 * LDA + 4 * PER_WORD);
            }
#pragma unroll
            for (int j = 0; j < FN; ++j) {  // b0: (k = t, n = g), b1: (k = t + 4, n = g) in words
                const Element* tile = Bs + (kk + member * PER_WORD) * LDB + warp_col + j * 8 + group;
                b[j][0] = column_word(tile);
                b[j][1] = column_word(tile + 4 * PER_WORD * LDB);
            }
            mma_warp_tile(acc, a, b, Bf16Operands<BF16>{});
        }
        __syncthreads();
    }

#pragma unroll
    for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int j = 0; j < FN; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) {  // c0, c1: row g, columns 2t and 2t + 1; c2, c3: row g + 8
                const int r = row0 + warp_row + i * 16 + group + (e / 2) * 8;
                const int c = col0 + warp_col + j * 8 + member * 2 + e % 2;
                if (r < M && c < N) C[r * N + c] = acc[i][j][e];
            }
}

template <int BM, int BN, int BK, int WM, int WN>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32)
tc_mma_sync(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C) {
    mma_sync_tiles<float, BM, BN, BK, WM, WN>(M, N, K, A, B, C);
}

template <int BM, int BN, int BK, int WM, int WN>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32)
tc_mma_sync_bf16(int M, int N, int K, const unsigned short* __restrict__ A, const unsigned short* __restrict__ B,
                 float* __restrict__ C) {
    mma_sync_tiles<unsigned short, BM, BN, BK, WM, WN>(M, N, K, A, B, C);
}

// Tensor-core rung 2 — A fragments with ldmatrix, float4 copies, 64×64 warp tiles (TF32, BF16).
//  * One ldmatrix.x4 reads a warp's whole 16×8 A fragment: for 32-bit data each 8×8 b16 matrix is 8 rows × 4
//    floats, and the four matrices (rows 0-7 / 8-15, columns 0-3 / 4-7) land as a0..a3 of the mma layout. Lane i
//    gives the address of row i % 16, columns (i / 16)·4..+3: 16-byte aligned since the row stride is BK + 4.
//  * A keeps tc01's pad rather than a swizzle: each 8×8 matrix is 8 consecutive rows, and with (BK + 4) / 4 odd
//    their 16-byte chunks fall in 8 distinct bank groups, while the tile stays plain row-major for float4 copies.
//  * B stays with scalar loads from tc01's padded tile: ldmatrix without .trans hands out rows, and row-major B's
//    fragment wants a column (k = t, t + 4 at n = g); with BN % 32 == 0 the pad of 8 keeps those loads conflict-free.
//  * Global→shared copies are float4s (VEC; element by element for unaligned rows) with no rounding on the way:
//    fragments are rounded to TF32 in registers after they are read, which the next rung's cp.async needs anyway.
//  * Wider warp tiles (64×64 by default: 4×8 mma tiles, 128 accumulators a thread) read each fragment for more mmas.
//  * BF16 (tc_ldmatrix_bf16): the same on bfloat16 tiles with mma m16n8k16 (BK counts 4-byte words along k, so a
//    tile takes the same shared memory in both modes). A's fragments come from ldmatrix.x4 as in TF32; row-major B's
//    from ldmatrix.x4.trans, which hands each lane the (k, k + 1) pair of its column that the mma's B layout wants,
//    for two 8-wide column blocks at once. Pads of 8 bfloat16 keep every row 16-byte aligned and an odd number of
//    16-byte chunks long, so both ldmatrix reads are free of conflicts. Copies of bfloat16 pairs as float4s (element
//    by element where rows are not 16-byte aligned).
#include "tc01_mma_sync.cu"

// A warp's 16×8 A fragment from a row-major tile (row stride LDA floats) at `as`, rounded to TF32.
template <int LDA>
__device__ __forceinline__ void load_a_fragment(unsigned (&a)[4], const float* as, int lane) {
    const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(as + (lane % 16) * LDA + (lane / 16) * 4));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3])
                 : "r"(s));
#pragma unroll
    for (int e = 0; e < 4; ++e) a[e] = __float_as_uint(to_tf32(__uint_as_float(a[e])));
}

// A warp's 8×8 B fragment (b0: k = t, n = g; b1: k = t + 4) from a row-major tile (row stride LDB), rounded to TF32.
template <int LDB>
__device__ __forceinline__ void load_b_fragment(unsigned (&b)[2], const float* bs, int lane) {
    const float* p = bs + (lane % 4) * LDB + lane / 4;
    b[0] = __float_as_uint(to_tf32(p[0]));
    b[1] = __float_as_uint(to_tf32(p[4 * LDB]));
}

// A warp's fragments of one 8-deep k-step: FM A fragments down from `as`, FN B fragments along from `bs`.
template <int FM, int FN, int LDA, int LDB>
__device__ __forceinline__ void load_fragments(unsigned (&a)[FM][4], unsigned (&b)[FN][2], const float* as,
                                               const float* bs, int lane) {
#pragma unroll
    for (int i = 0; i < FM; ++i) load_a_fragment<LDA>(a[i], as + i * 16 * LDA, lane);
#pragma unroll
    for (int j = 0; j < FN; ++j) load_b_fragment<LDB>(b[j], bs + j * 8, lane);
}

// A warp's accumulators into C from its tile origin (row0, col0): c0, c1 at row g, columns 2t and 2t + 1; c2, c3
// at row g + 8. VEC: each pair as one float2 (N is a multiple of 4 and C 16-byte aligned, so the pair is aligned
// and, as N is even, inside C whenever its first column is).
template <bool VEC, int FM, int FN>
__device__ __forceinline__ void store_accumulators(float* C, const float (&acc)[FM][FN][4], int row0, int col0,
                                                   int M, int N, int lane) {
#pragma unroll
    for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int j = 0; j < FN; ++j)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int r = row0 + i * 16 + lane / 4 + h * 8, c = col0 + j * 8 + (lane % 4) * 2;
                if (r >= M || c >= N) continue;
                if (VEC) {
                    *reinterpret_cast<float2*>(C + r * N + c) = make_float2(acc[i][j][2 * h], acc[i][j][2 * h + 1]);
                } else {
                    C[r * N + c] = acc[i][j][2 * h];
                    if (c + 1 < N) C[r * N + c + 1] = acc[i][j][2 * h + 1];
                }
            }
}

// ROWS×COLS elements of a row-major bfloat16 matrix (`g` at the tile's origin, row stride ld) to shared memory at
// s[at(r, c)], element by element with plain loads, zero-filled outside rows_left×cols_left: for rows that are not
// 16-byte aligned (a row of odd length puts pairs across rows, and float4 loads or cp.async copy 4 bytes at least). In
// tc03 and tc04 the stores fill a later tile's buffer, as their copies do, so the pipeline stays.
template <int ROWS, int COLS, int THREADS, class At>
__device__ __forceinline__ void copy_elements(unsigned short* s, const unsigned short* g, int ld, int rows_left,
                                              int cols_left, At at) {
    for (int i = threadIdx.x; i < ROWS * COLS; i += THREADS) {
        const int r = i / COLS, c = i % COLS;
        s[at(r, c)] = r < rows_left && c < cols_left ? g[r * ld + c] : 0;
    }
}

// What a mode changes in tc02 (and tc03): the element, the k-step, the pads, the tile copy and the fragments.
struct Tf32Fragments {
    using Element = float;
    static constexpr int PER_WORD = 1, K_STEP = 8, A_PAD = 4, B_PAD = 8;
    static constexpr bool BF16 = false;

    template <int ROWS, int COLS, int THREADS, int LD, bool VEC>
    static __device__ __forceinline__ void tile(float* s, const float* g, int row0, int col0, int rows, int cols,
                                                int ld) {
        load_tile4<ROWS, COLS, THREADS, LD, VEC>(s, g, row0, col0, rows, cols, ld);
    }

    template <int FM, int FN, int LDA, int LDB>
    static __device__ __forceinline__ void fragments(unsigned (&a)[FM][4], unsigned (&b)[FN][2], const float* as,
                                                     const float* bs, int lane) {
        load_fragments<FM, FN, LDA, LDB>(a, b, as, bs, lane);
    }
};

struct Bf16Fragments {
    using Element = unsigned short;  // bfloat16 bits
    static constexpr int PER_WORD = 2, K_STEP = 16, A_PAD = 8, B_PAD = 8;
    static constexpr bool BF16 = true;

    // VEC: pairs as float4s (K and N multiples of 8); else element by element.
    template <int ROWS, int COLS, int THREADS, int LD, bool VEC>
    static __device__ __forceinline__ void tile(unsigned short* s, const unsigned short* g, int row0, int col0,
                                                int rows, int cols, int ld) {
        if constexpr (VEC)
            load_tile4<ROWS, COLS / 2, THREADS, LD / 2, true>(reinterpret_cast<float*>(s),
                                                               reinterpret_cast<const float*>(g), row0, col0 / 2, rows,
                                                               cols / 2, ld / 2);
        else
            copy_elements<ROWS, COLS, THREADS>(s, g + row0 * ld + col0, ld, rows - row0, cols - col0,
                                               [](int r, int c) { return r * LD + c; });
    }

    // A: ldmatrix.x4 of rows 0-7 / 8-15 × k 0-7 / 8-15 (a0..a3); B: ldmatrix.x4.trans of k 0-7 / 8-15 for the
    // column blocks j and j + 1 (b[j][0], b[j][1], b[j + 1][0], b[j + 1][1]). Lane i addresses row i % 16,
    // 8·(i / 16) elements in.
    template <int FM, int FN, int LDA, int LDB>
    static __device__ __forceinline__ void fragments(unsigned (&a)[FM][4], unsigned (&b)[FN][2],
                                                     const unsigned short* as, const unsigned short* bs, int lane) {
        static_assert(FN % 2 == 0, "B fragments come in pairs of 8-wide column blocks");
#pragma unroll
        for (int i = 0; i < FM; ++i) {
            const unsigned s = static_cast<unsigned>(
                __cvta_generic_to_shared(as + (i * 16 + lane % 16) * LDA + (lane / 16) * 8));
            asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                         : "=r"(a[i][0]), "=r"(a[i][1]), "=r"(a[i][2]), "=r"(a[i][3])
                         : "r"(s));
        }
#pragma unroll
        for (int j = 0; j < FN; j += 2) {
            const unsigned s = static_cast<unsigned>(
                __cvta_generic_to_shared(bs + (lane % 16) * LDB + j * 8 + (lane / 16) * 8));
            asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                         : "=r"(b[j][0]), "=r"(b[j][1]), "=r"(b[j + 1][0]), "=r"(b[j + 1][1])
                         : "r"(s));
        }
    }
};

template <class Mode, int BM, int BN, int BK, int WM, int WN, bool VEC>
__device__ __forceinline__ void ldmatrix_tiles(int M, int N, int K, const typename Mode::Element* __restrict__ A,
                                               const typename Mode::Element* __restrict__ B, float* __restrict__ C) {
    using T = typename Mode::Element;
    constexpr int WARPS_N = BN / WN, THREADS = (BM / WM) * WARPS_N * 32, FM = WM / 16, FN = WN / 8;
    constexpr int KD = BK * Mode::PER_WORD, LDA = KD + Mode::A_PAD, LDB = BN + Mode::B_PAD;
    static_assert(BM % WM == 0 && BN % WN == 0 && WM % 16 == 0 && WN % 8 == 0, "whole mma tiles");
    static_assert(BK % 8 == 0, "whole k-steps, and (BK + 4) / 4 odd for conflict-free ldmatrix");
    __shared__ __align__(16) T As[BM * LDA];  // ldmatrix and float4 stores need 16-byte aligned rows
    __shared__ __align__(16) T Bs[KD * LDB];

    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int warp_row = (warp / WARPS_N) * WM, warp_col = (warp % WARPS_N) * WN;

    float acc[FM][FN][4] = {};
    for (int k0 = 0; k0 < K; k0 += KD) {
        Mode::template tile<BM, KD, THREADS, LDA, VEC>(As, A, row0, k0, M, K, K);
        Mode::template tile<KD, BN, THREADS, LDB, VEC>(Bs, B, k0, col0, K, N, N);
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < KD; kk += Mode::K_STEP) {
            unsigned a[FM][4], b[FN][2];
            Mode::template fragments<FM, FN, LDA, LDB>(a, b, As + warp_row * LDA + kk, Bs + kk * LDB + warp_col,
                                                       lane);
            mma_warp_tile(acc, a, b, Bf16Operands<Mode::BF16>{});
        }
        __syncthreads();
    }
    store_accumulators<VEC>(C, acc, row0 + warp_row, col0 + warp_col, M, N, lane);
}

template <int BM, int BN, int BK, int WM, int WN, bool VEC>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32)
tc_ldmatrix(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C) {
    ldmatrix_tiles<Tf32Fragments, BM, BN, BK, WM, WN, VEC>(M, N, K, A, B, C);
}

template <int BM, int BN, int BK, int WM, int WN, bool VEC>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32)
tc_ldmatrix_bf16(int M, int N, int K, const unsigned short* __restrict__ A, const unsigned short* __restrict__ B,
                 float* __restrict__ C) {
    ldmatrix_tiles<Bf16Fragments, BM, BN, BK, WM, WN, VEC>(M, N, K, A, B, C);
}

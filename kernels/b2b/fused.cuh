// The fused back-to-back GEMM, D = (A0·B0)·B1, row-major FP32: A0[M][K0], B0[K0][N0], B1[N0][N1], D[M][N1].
// A block owns BM rows of D. Phase 1 computes its BM×N0 slice of A1 = A0·B0 into shared memory (k split in BK
// chunks, double-buffered through cp.async); phase 2 multiplies that slice by B1 (streamed the same way) and writes
// D. A1 never reaches global memory, so the block tile spans all of N0 and N1: NP0 ≥ N0 and NP1 ≥ N1 are the
// compile-time capacities. Loads outside a matrix are zero-filled (cp.async src-size 0), stores outside D dropped.
// The per-chunk product is the rung's TILE<BM, NP> (FFMA in 01, TF32 mma.sync in 02): zero(), step(A, lda, B,
// ldb) for one BK chunk, store(S, lds).
#pragma once

#define CEIL_DIV(a, b) (((a) + (b) - 1) / (b))

constexpr int THREADS = 256;
constexpr int BM = 64;   // rows of D per block
constexpr int BK = 32;   // k chunk of both products
constexpr int PAD = 4;   // row padding of A-side tiles (lda ≡ 4 mod 32): shifts banks, keeps 16-byte alignment
constexpr int PAD_B = 8; // row padding of B chunks (ldb ≡ 8 mod 32)

__device__ __forceinline__ void cp_async4(float* dst, const float* src, int bytes) {
    const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(s), "l"(src), "r"(bytes));
}

__device__ __forceinline__ void cp_async16(float* dst, const float* src, int bytes) {
    const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src), "r"(bytes));
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

// ROWS×COLS of a row-major matrix (rows×cols, stride ld) from (row0, col0) into shared memory (stride LD), queued
// as cp.async; outside the matrix the copy reads nothing and zero-fills. VEC: 16-byte copies (ld % 4 == 0 and an
// aligned base, checked by the caller); otherwise 4-byte ones.
template <int ROWS, int COLS, int LD, bool VEC>
__device__ __forceinline__ void load_async(float* s, const float* g, int row0, int col0, int rows, int cols, int ld) {
    constexpr int W = VEC ? 4 : 1;
    constexpr int CW = COLS / W;
#pragma unroll 4  // a full unroll holds every address in registers at once (32 of them for a 32×256 scalar copy)
    for (int it = 0; it < CEIL_DIV(ROWS * CW, THREADS); ++it) {
        const int i = it * THREADS + threadIdx.x;
        if ((ROWS * CW) % THREADS != 0 && i >= ROWS * CW) break;
        const int r = i / CW, c = (i % CW) * W;
        const int gr = row0 + r, gc = col0 + c;
        const int inside = gr < rows ? max(0, min(W, cols - gc)) : 0;
        const float* src = inside ? g + static_cast<long long>(gr) * ld + gc : g;
        if (VEC)
            cp_async16(s + r * LD + c, src, inside * 4);
        else
            cp_async4(s + r * LD + c, src, inside * 4);
    }
}

// Chunks 0 … count-1 through two cp.async stages: chunk c + 1 is in flight while chunk c is multiplied.
// load(chunk, stage) queues and commits a chunk; step(chunk, stage) multiplies it once it has landed.
template <class LOAD, class STEP>
__device__ __forceinline__ void double_buffered(int count, LOAD load, STEP step) {
    load(0, 0);
    for (int c = 0; c < count; ++c) {
        if (c + 1 < count) {
            load(c + 1, (c + 1) & 1);
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();
        step(c, c & 1);
        __syncthreads();  // the stage is refilled next
    }
}

// The kernel body, shared by the rungs; TILE<BM, NP> is the rung's product of a BM×BK by a BK×NP chunk.
template <template <int, int> class TILE, int NP0, int NP1, bool VEC>
__device__ __forceinline__ void b2b_fused(int M, int K0, int N0, int N1, const float* __restrict__ A0,
                                          const float* __restrict__ B0, const float* __restrict__ B1,
                                          float* __restrict__ D) {
    constexpr int NP = NP0 > NP1 ? NP0 : NP1;
    constexpr int LDI = NP + PAD;  // the A1 slice, later the D tile
    constexpr int LDA = BK + PAD;
    constexpr int LDB = NP + PAD_B;
    extern __shared__ __align__(128) float smem[];
    float* slice = smem;                 // BM × LDI
    float* as = slice + BM * LDI;        // 2 stages × BM × LDA
    float* bs = as + 2 * BM * LDA;       // 2 stages × BK × LDB
    const int row0 = blockIdx.x * BM;

    // Phase 1: slice = A0[row0 : row0 + BM, :] · B0. Columns N0..NP0 come out zero (B0 is zero-filled there).
    auto load0 = [&](int chunk, int stage) {
        load_async<BM, BK, LDA, VEC>(as + stage * BM * LDA, A0, row0, chunk * BK, M, K0, K0);
        load_async<BK, NP0, LDB, VEC>(bs + stage * BK * LDB, B0, chunk * BK, 0, K0, N0, N0);
        cp_async_commit();
    };
    TILE<BM, NP0> a1;
    a1.zero();
    const int chunks0 = CEIL_DIV(K0, BK);
    double_buffered(chunks0, load0, [&](int, int stage) {
        a1.step(as + stage * BM * LDA, LDA, bs + stage * BK * LDB, LDB);
    });
    a1.store(slice, LDI);

    // Phase 2: D tile = slice · B1, k over N0 (rows of B1 past N0 are zero-filled).
    auto load1 = [&](int chunk, int stage) {
        load_async<BK, NP1, LDB, VEC>(bs + stage * BK * LDB, B1, chunk * BK, 0, N0, N1, N1);
        cp_async_commit();
    };
    TILE<BM, NP1> d;
    d.zero();
    const int chunks1 = CEIL_DIV(N0, BK);
    // (the helper's first barrier also orders the slice's stores before phase 2 reads it)
    double_buffered(chunks1, load1, [&](int chunk, int stage) {
        d.step(slice + chunk * BK, LDI, bs + stage * BK * LDB, LDB);
    });
    d.store(slice, LDI);  // the slice is no longer read: it stages the D tile
    __syncthreads();

    // Coalesced stores of the BM×N1 tile, 16 bytes at a time where the row allows.
    constexpr int W = VEC ? 4 : 1;
    constexpr int CW = NP1 / W;
    for (int i = threadIdx.x; i < BM * CW; i += THREADS) {
        const int r = i / CW, c = (i % CW) * W, gr = row0 + r;
        if (gr >= M || c >= N1) continue;
        float* dst = D + static_cast<long long>(gr) * N1 + c;
        if (VEC && c + 3 < N1) {
            *reinterpret_cast<float4*>(dst) = *reinterpret_cast<const float4*>(slice + r * LDI + c);
        } else {
            for (int j = 0; j < W && c + j < N1; ++j) dst[j] = slice[r * LDI + c + j];
        }
    }
}

// Blocks per SM that the register budget must allow (launch bounds): 3 at N0, N1 ≤ 64, 2 up to 128, else 1.
// More resident blocks keep more loads in flight; a fourth would spill.
constexpr int min_blocks(int np0, int np1) { return np0 > 128 || np1 > 128 ? 1 : np0 > 64 || np1 > 64 ? 2 : 3; }

constexpr int smem_floats(int np0, int np1) {
    return BM * ((np0 > np1 ? np0 : np1) + PAD) + 2 * BM * (BK + PAD) + 2 * BK * ((np0 > np1 ? np0 : np1) + PAD_B);
}

// Tensor-core rung 5 — TMA and warp specialisation (sm_90a, BF16 and TF32): wgmmas fed by the Tensor Memory
// Accelerator.
//  * A producer warpgroup and BM / 64 consumer warpgroups. One producer thread fills each stage with three to five
//    cp.async.bulk.tensor instructions: a box of A (BM rows × 64 k) and one per 64 columns of B (64 k × 64). The TMA
//    unit computes the addresses, zero-fills what lies outside the matrix and stores with the 128-byte swizzle that
//    wgmma reads, so the consumers spend no instruction on copies, addresses or edges (tc04's threads spent most of
//    their issue slots there). The tensor maps are encoded on the host (cuTensorMapEncodeTiled) and passed by value.
//  * Stages are handed over by mbarriers, not __syncthreads: full[s] completes when the TMA unit has written the bytes
//    it was told to expect, empty[s] when every consumer warp has released the stage. A consumer keeps one wgmma group
//    in flight and releases the stage of the group before it.
//  * wgmma n256 where BN allows: one instruction per k-step and warpgroup, reading A's 64-row slab once for 256
//    columns (tc04's m64n128k16 reads it once per 128).
//  * BF16 rows that are not 16-byte aligned (TMA needs 16-byte strides): the producer warpgroup's 128 threads copy
//    element by element to the same swizzled places, fence.proxy.async and arrive, so every shape runs.
//  * TF32: wgmma reads 32-bit operands K-major only, and B is stored MN-major. So a kernel first copies B to a K-major
//    Bᵀ (k_major_tf32, timed with the product), rounding it to TF32 on the way; the same pipeline then reads 32 floats
//    (128 bytes) of k per line, both operands K-major, with m64nNk8 instructions. The host pads Bᵀ's rows (and A's
//    where K is not a multiple of 4) to 16 bytes, so TF32 always copies with TMA. A's low mantissa bits are dropped by
//    the tensor cores (they read TF32 from the float's top 19 bits).
//  * Tiles in tc04's grouped order. Each block loops over tiles blockIdx.x, blockIdx.x + gridDim.x, …; this rung
//    launches a block per tile, tc06 fewer blocks that persist.
#pragma once  // included by tc06 … tc09, twice into tc09 (through tc07 and tc08)
#include "tc04_wgmma.cu"

#include "../tma.cuh"

// d += A·B for one 64×256×16 step of a warpgroup in BF16: B MN-major, read transposed (tc04's instruction, twice as
// wide).
__device__ __forceinline__ void wgmma_m64n256k16(float (&d)[32][4], unsigned long long a, unsigned long long b) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 " WGMMA_D256 ", %128, %129, p, 1, 1, 0, 1;\n}\n"
                 : WGMMA_D256_OPERANDS(d)
                 : "l"(a), "l"(b));
}

// d += A·B for one 64×N×8 step of a warpgroup in TF32, both operands K-major.
__device__ __forceinline__ void wgmma_m64n128k8_tf32(float (&d)[16][4], unsigned long long a, unsigned long long b) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 " WGMMA_D128 ", %64, %65, p, 1, 1;\n}\n"
                 : WGMMA_D128_OPERANDS(d)
                 : "l"(a), "l"(b));
}

__device__ __forceinline__ void wgmma_m64n256k8_tf32(float (&d)[32][4], unsigned long long a, unsigned long long b) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 " WGMMA_D256 ", %128, %129, p, 1, 1;\n}\n"
                 : WGMMA_D256_OPERANDS(d)
                 : "l"(a), "l"(b));
}

// What a mode changes: the element, a k-step, and B's stage (its TMA boxes, its descriptors). A's stage is the same in
// both: BM lines of 128 bytes of k, K-major, one box; a k-step is 32 bytes along the line.
struct TmaBf16 {
    using Element = unsigned short;
    static constexpr int K_TILE = 64, K_STEP = 16;  // elements of k per line, per instruction
    // B as stored, MN-major: BN / 64 blocks of K_TILE lines (one k each) × 64 columns (tc04's layout), a box each.
    template <int BN>
    static __device__ __forceinline__ void load_b(Element* bs, const TensorMap& map, int col0, int k0,
                                                  unsigned long long* barrier) {
#pragma unroll
        for (int nb = 0; nb < BN / 64; ++nb) tma_load(bs + nb * K_TILE * 64, map, col0 + nb * 64, k0, barrier);
    }
    // Columns from n of k-step k: 64-column blocks K_TILE lines apart, 8-k groups 1024 bytes apart.
    static __device__ __forceinline__ unsigned long long b_descriptor(const Element* bs, int n, int k) {
        return swizzled_descriptor(bs + n * K_TILE + k * K_STEP * 64, K_TILE * 128, 1024);
    }
    template <int WIDE>
    static __device__ __forceinline__ void mma(float (&d)[WIDE / 8][4], unsigned long long a, unsigned long long b) {
        if constexpr (WIDE == 256) wgmma_m64n256k16(d, a, b);
        else wgmma_m64n128k16(d, a, b);
    }
};

struct TmaTf32 {
    using Element = float;
    static constexpr int K_TILE = 32, K_STEP = 8;
    // Bᵀ, K-major: BN lines (one column of B each) of K_TILE k, one box.
    template <int BN>
    static __device__ __forceinline__ void load_b(Element* bs, const TensorMap& map, int col0, int k0,
                                                  unsigned long long* barrier) {
        tma_load(bs, map, k0, col0, barrier);
    }
    static __device__ __forceinline__ unsigned long long b_descriptor(const Element* bs, int n, int k) {
        return swizzled_descriptor(bs + n * K_TILE + k * K_STEP, 16, 1024);
    }
    template <int WIDE>
    static __device__ __forceinline__ void mma(float (&d)[WIDE / 8][4], unsigned long long a, unsigned long long b) {
        if constexpr (WIDE == 256) wgmma_m64n256k8_tf32(d, a, b);
        else wgmma_m64n128k8_tf32(d, a, b);
    }
};

// One stage (K_TILE of k) of a consumer warpgroup: its 64 rows of A against all BN columns of B.
template <class Mode, int BN>
__device__ __forceinline__ void wgmma_stage(float (&acc)[BN / 8][4], const typename Mode::Element* as,
                                            const typename Mode::Element* bs) {
    constexpr int WIDE = BN % 256 == 0 ? 256 : 128;  // columns per instruction
#pragma unroll
    for (int k = 0; k < Mode::K_TILE / Mode::K_STEP; ++k) {
        const unsigned long long a = swizzled_descriptor(as + k * Mode::K_STEP, 16, 1024);
#pragma unroll
        for (int n = 0; n < BN / WIDE; ++n)
            Mode::template mma<WIDE>(reinterpret_cast<float(&)[WIDE / 8][4]>(acc[n * WIDE / 8]), a,
                                     Mode::b_descriptor(bs, n * WIDE, k));
    }
}

// How a consumer warpgroup's 64×BN accumulators reach C: here straight from registers (float2 stores where VEC: C's
// rows are 16-byte aligned). tc08 stages them in shared memory for TMA stores; smem_bytes() is what it needs there.
template <bool VEC>
struct DirectStores {
    __device__ static constexpr int smem_bytes() { return 0; }
    template <int BN>
    __device__ __forceinline__ void store(float* C, const float (&acc)[BN / 8][4], char*, int row0, int col0, int M,
                                          int N, int consumer, int warp, int lane) const {
        store_accumulators<VEC>(C, reinterpret_cast<const float(&)[1][BN / 8][4]>(acc), row0 + consumer * 64 + warp * 16,
                                col0, M, N, lane);
    }
    __device__ __forceinline__ void finish() const {}
};

// TMA: the producer's one thread issues the copies (else its 128 threads copy BF16 element by element). Epilogue:
// how the consumers store C (DirectStores<VEC>, or tc08's staged TMA stores).
template <class Mode, int BM, int BN, int STAGES, int GROUP, bool TMA, class Epilogue>
__device__ __forceinline__ void tma_gemm(int M, int N, int K, const TensorMap& a_map, const TensorMap& b_map,
                                         const typename Mode::Element* __restrict__ A,
                                         const typename Mode::Element* __restrict__ B, float* __restrict__ C,
                                         const Epilogue& epilogue) {
    using Element = typename Mode::Element;
    constexpr int BK = Mode::K_TILE, CONSUMERS = BM / 64, A_TILE = BM * BK, B_TILE = BK * BN;
    static_assert(BM % 64 == 0 && BN % 128 == 0 && BM <= 256 && BN <= 256, "whole warpgroup tiles; 256-row boxes");
    extern __shared__ float4 smem[];
    Element* As = reinterpret_cast<Element*>((reinterpret_cast<size_t>(smem) + 1023) / 1024 *
                                             1024);  // [STAGES][BM lines], 1 KiB of slack allocated
    Element* Bs = As + STAGES * A_TILE;              // [STAGES][the mode's B stage]
    char* staging = reinterpret_cast<char*>(Bs + STAGES * B_TILE);  // the epilogue's, 1024-byte aligned
    unsigned long long* full = reinterpret_cast<unsigned long long*>(staging + Epilogue::smem_bytes());
    unsigned long long* empty = full + STAGES;

    const int tiles = CEIL_DIV(M, BM) * CEIL_DIV(N, BN), ktiles = CEIL_DIV(K, BK);
    const int warpgroup = threadIdx.x / 128, warp = threadIdx.x % 128 / 32, lane = threadIdx.x % 32;
    // full: the TMA thread's expect (and the bytes), or every copying thread; empty: every consumer warp
    init_stage_barriers<STAGES>(full, empty, TMA ? 1 : 128, CONSUMERS * 4);

    if (warpgroup == 0) {  // the producer
        if (TMA && threadIdx.x != 0) return;
        int use = 0;  // stages filled so far, over all of this block's tiles
        for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
            const int2 origin = grouped_tile<BM, BN, GROUP>(tile, M, N);
            for (int kt = 0; kt < ktiles; ++kt, ++use) {
                const int stage = use % STAGES, k0 = kt * BK;
                if (use >= STAGES) barrier_wait(empty + stage, (use / STAGES - 1) & 1);  // its last use released
                Element* as = As + stage * A_TILE;
                Element* bs = Bs + stage * B_TILE;
                if constexpr (TMA) {
                    barrier_expect(full + stage, (A_TILE + B_TILE) * sizeof(Element));  // whole boxes, zero-filled too
                    tma_load(as, a_map, k0, origin.x, full + stage);
                    Mode::template load_b<BN>(bs, b_map, origin.y, k0, full + stage);
                } else {
                    copy_swizzled<BM, BK, 128, false, false>(as, A + origin.x * K + k0, K, M - origin.x, K - k0);
                    copy_swizzled<BK, BN, 128, false, true>(bs, B + k0 * N + origin.y, N, K - k0, N - origin.y);
                    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // for the tensor cores to see
                    barrier_arrive(full + stage);
                }
            }
        }
        return;
    }

    const int consumer = warpgroup - 1;
    int use = 0;
    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        const int2 origin = grouped_tile<BM, BN, GROUP>(tile, M, N);
        float acc[BN / 8][4] = {};
        for (int kt = 0; kt < ktiles; ++kt, ++use) {
            const int stage = use % STAGES;
            barrier_wait(full + stage, (use / STAGES) & 1);
            asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
            wgmma_stage<Mode, BN>(acc, As + stage * A_TILE + consumer * 64 * BK, Bs + stage * B_TILE);
            asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
            asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");  // the group before this one is done
            if (kt > 0 && lane == 0) barrier_arrive(empty + (use - 1) % STAGES);
        }
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
        if (ktiles > 0 && lane == 0) barrier_arrive(empty + (use - 1) % STAGES);
        epilogue.template store<BN>(C, acc, staging, origin.x, origin.y, M, N, consumer, warp, lane);
    }
    epilogue.finish();
}

template <int BM, int BN, int STAGES, int GROUP, bool VEC>
__global__ void __launch_bounds__((BM / 64 + 1) * 128, 1)
tc_tma_bf16(int M, int N, int K, const __grid_constant__ TensorMap a_map, const __grid_constant__ TensorMap b_map,
            const unsigned short* __restrict__ A, const unsigned short* __restrict__ B, float* __restrict__ C) {
    tma_gemm<TmaBf16, BM, BN, STAGES, GROUP, VEC>(M, N, K, a_map, b_map, A, B, C, DirectStores<VEC>());
}

// b_map: Bᵀ's (k_major_tf32). B is not read; VEC only chooses C's stores.
template <int BM, int BN, int STAGES, int GROUP, bool VEC>
__global__ void __launch_bounds__((BM / 64 + 1) * 128, 1)
tc_tma_tf32(int M, int N, int K, const __grid_constant__ TensorMap a_map, const __grid_constant__ TensorMap b_map,
            const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C) {
    tma_gemm<TmaTf32, BM, BN, STAGES, GROUP, true>(M, N, K, a_map, b_map, A, B, C, DirectStores<VEC>());
}

// B (K×N, row-major) to Bᵀ (N×K, rows ld floats apart), rounded to TF32: the K-major operand that TF32 wgmma reads.
// TILE×TILE tiles through shared memory (padded by a float: conflict-free columns), reads and writes coalesced.
template <int TILE>
__global__ void __launch_bounds__(TILE * 8)
k_major_tf32(int K, int N, int ld, const float* __restrict__ B, float* __restrict__ Bt) {
    __shared__ float tile[TILE][TILE + 1];
    const int k0 = blockIdx.y * TILE, n0 = blockIdx.x * TILE;
    for (int r = threadIdx.y; r < TILE; r += 8)
        if (k0 + r < K && n0 + threadIdx.x < N) tile[r][threadIdx.x] = to_tf32(B[(size_t)(k0 + r) * N + n0 + threadIdx.x]);
    __syncthreads();
    for (int r = threadIdx.y; r < TILE; r += 8)
        if (n0 + r < N && k0 + threadIdx.x < K) Bt[(size_t)(n0 + r) * ld + k0 + threadIdx.x] = tile[threadIdx.x][r];
}

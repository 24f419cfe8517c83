// Rung 5: the fused b2b product on Hopper's warpgroup MMAs (TF32, sm_90a), for rung 4's narrow shapes (K0, N0,
// N1 ≤ 64, K0 a multiple of 4).
//  * Rung 4 is bound by shared memory, not DRAM: with mma.sync every warp reads its own fragments of A0, B0, A1 and B1,
//    several times the bytes that reach the tile from DRAM. wgmma reads a shared operand once per warpgroup and 64
//    rows: a 64-row tile's first product (m64n64k8, 8 k-steps) reads A0's tile and B0ᵀ once.
//  * The second product takes its A, the intermediate A1, from registers: the first product's accumulators where they
//    are, rounded to TF32. A thread holds columns 2t and 2t + 1 of each 8-column tile where wgmma's fragment wants k
//    = t and t + 4, so B1ᵀ's k positions are stored in that order (position t holds row 2t, t + 4 holds 2t + 1): the
//    sum over k is the same. A1 never reaches shared memory.
//  * B0ᵀ and B1ᵀ are made once per block (transposed, rounded to TF32, 128-byte swizzled: TF32 wgmma reads K-major
//    operands only) and stay. A0's 64-row tiles arrive by TMA (two 64 × 32-float boxes, swizzled, zero-filled
//    outside A0), STAGES deep, from one producer thread; mbarriers hand the stages over (tc05's pipeline).
//  * CONSUMERS warpgroups take turns at the block's tiles (blockIdx.x, + gridDim.x, …; one block per SM), so that
//    while one waits for its products or stores D another issues. D is stored from the accumulators (float2).
#include "../cupy/tensorcore/tc05_tma.cu"

constexpr int RESIDENT = 64;     // capacity of K0, N0 and N1
constexpr int TILE_ROWS = 64;    // rows of A0 and D per tile: one warpgroup's wgmma M
constexpr int HALF = 64 * 32;    // floats of a 64-line, 128-byte-line half of a K-major operand (k 0–31 or 32–63)
constexpr int OPERAND = 2 * HALF;  // a whole 64 × 64 K-major operand: B0ᵀ, B1ᵀ or a stage of A0

#define WGMMA_D64                                                                                                    \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                                        \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define WGMMA_TILE(d, i) "+f"(d[i][0]), "+f"(d[i][1]), "+f"(d[i][2]), "+f"(d[i][3])
#define WGMMA_D64_OPERANDS(d)                                                                                        \
    WGMMA_TILE(d, 0), WGMMA_TILE(d, 1), WGMMA_TILE(d, 2), WGMMA_TILE(d, 3), WGMMA_TILE(d, 4), WGMMA_TILE(d, 5),      \
        WGMMA_TILE(d, 6), WGMMA_TILE(d, 7)

// d += A·B for one 64×64×8 step, both operands K-major in shared memory.
__device__ __forceinline__ void wgmma_m64n64k8_tf32(float (&d)[8][4], unsigned long long a, unsigned long long b) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 " WGMMA_D64 ", %32, %33, p, 1, 1;\n}\n"
                 : WGMMA_D64_OPERANDS(d)
                 : "l"(a), "l"(b));
}

// d += A·B for one 64×64×8 step, A from registers (rows g and g + 8, k t and t + 4 of the warp's 16 rows).
__device__ __forceinline__ void wgmma_m64n64k8_tf32_rs(float (&d)[8][4], const unsigned (&a)[4],
                                                       unsigned long long b) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 " WGMMA_D64 ", {%32, %33, %34, %35}, %36, p, 1, "
                 "1;\n}\n"
                 : WGMMA_D64_OPERANDS(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
}

// Element (line, k) of a K-major operand: line = its row of M or N, k < 64; 128-byte lines, swizzled.
__device__ __forceinline__ int k_major(int line, int k) {
    return (k / 32) * HALF + line * 32 + ((((k % 32) / 4) ^ (line % 8)) * 4) + k % 4;
}

// The descriptor of k-step s (k 8s … 8s + 7) of a K-major operand: 8-line groups 1024 bytes apart.
__device__ __forceinline__ unsigned long long k_step(const float* operand, int s) {
    return swizzled_descriptor(operand + (s / 4) * HALF + (s % 4) * 8, 16, 1024);
}

// Where row kk of B1 goes among the k positions of its 8-step (see the header).
__device__ __forceinline__ int permuted(int kk) { return kk / 8 * 8 + (kk % 2) * 4 + kk % 8 / 2; }

template <int CONSUMERS, int STAGES, bool VEC>
__global__ void __launch_bounds__(CONSUMERS * 128 + 32, 1)
b2b_fused_wgmma(int M, int K0, int N0, int N1, const __grid_constant__ TensorMap a0_map, const float* __restrict__ B0,
                const float* __restrict__ B1, float* __restrict__ D) {
    // A stage always goes to the same consumer, which waits for its next fill only after releasing it: a phase parity
    // then never names a phase two back.
    static_assert(STAGES % CONSUMERS == 0, "stages in whole turns of the consumers");
    extern __shared__ float4 smem[];
    float* b0t = reinterpret_cast<float*>((reinterpret_cast<size_t>(smem) + 1023) / 1024 * 1024);  // 1 KiB of slack
    float* b1t = b0t + OPERAND;
    float* stages = b1t + OPERAND;  // [STAGES][OPERAND]
    unsigned long long* full = reinterpret_cast<unsigned long long*>(stages + STAGES * OPERAND);
    unsigned long long* empty = full + STAGES;
    const int tiles = CEIL_DIV(M, TILE_ROWS);

    // B0ᵀ and B1ᵀ, zero outside the matrices (so that the products over the full 64 are exact), rounded to TF32.
    for (int i = threadIdx.x; i < RESIDENT * RESIDENT; i += blockDim.x) {
        const int k = i / RESIDENT, n = i % RESIDENT;  // reads along rows of B0 and B1
        b0t[k_major(n, k)] = k < K0 && n < N0 ? to_tf32(B0[k * N0 + n]) : 0.0f;
        b1t[k_major(n, permuted(k))] = k < N0 && n < N1 ? to_tf32(B1[k * N1 + n]) : 0.0f;
    }
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // for the tensor cores to see
    init_stage_barriers<STAGES>(full, empty, 1, 4);  // full: the TMA thread's expect; empty: a consumer's 4 warps

    const int warpgroup = threadIdx.x / 128, warp = threadIdx.x % 128 / 32, lane = threadIdx.x % 32;
    if (warpgroup == CONSUMERS) {  // the producer: one thread issues every copy
        if (threadIdx.x != CONSUMERS * 128) return;
        for (int use = 0, tile = blockIdx.x; tile < tiles; ++use, tile += gridDim.x) {
            const int stage = use % STAGES;
            if (use >= STAGES) barrier_wait(empty + stage, (use / STAGES - 1) & 1);  // its last tile released
            barrier_expect(full + stage, OPERAND * sizeof(float));  // whole boxes, zero-filled too
            tma_load(stages + stage * OPERAND, a0_map, 0, tile * TILE_ROWS, full + stage);
            tma_load(stages + stage * OPERAND + HALF, a0_map, 32, tile * TILE_ROWS, full + stage);
        }
        return;
    }

    for (int use = warpgroup, tile = blockIdx.x + warpgroup * gridDim.x; tile < tiles;
         use += CONSUMERS, tile += CONSUMERS * gridDim.x) {
        const int stage = use % STAGES;
        barrier_wait(full + stage, (use / STAGES) & 1);
        float a1[8][4] = {};
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
        for (int s = 0; s < RESIDENT / 8; ++s) wgmma_m64n64k8_tf32(a1, k_step(stages + stage * OPERAND, s), k_step(b0t, s));
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
        if (lane == 0) barrier_arrive(empty + stage);

        unsigned fragments[8][4];  // k-step j: (g, 2t), (g + 8, 2t), (g, 2t + 1), (g + 8, 2t + 1) of A1's columns 8j…
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            fragments[j][0] = __float_as_uint(to_tf32(a1[j][0]));
            fragments[j][1] = __float_as_uint(to_tf32(a1[j][2]));
            fragments[j][2] = __float_as_uint(to_tf32(a1[j][1]));
            fragments[j][3] = __float_as_uint(to_tf32(a1[j][3]));
        }
        float d[8][4] = {};
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
        for (int j = 0; j < RESIDENT / 8; ++j) wgmma_m64n64k8_tf32_rs(d, fragments[j], k_step(b1t, j));
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
        store_accumulators<VEC>(D, reinterpret_cast<const float(&)[1][8][4]>(d), tile * TILE_ROWS + warp * 16, 0, M,
                                N1, lane);
    }
}

// Tensor-core rung 7 — TF32 without the transposing copy (sm_90a): B's fragments through registers.
//  * TF32 wgmma reads shared-memory operands K-major only, and B (K×N, row-major) is MN-major: tc05 first copies it
//    to a K-major Bᵀ, a read and a write of B per product. Here the product is turned around, Cᵀ = Bᵀ·Aᵀ: wgmma's A
//    operand comes from registers, which the threads may load in any order, and its B operand is A's tile as TMA
//    stores it (K-major: a row of A is a column of Aᵀ).
//  * tc05's producer warpgroup and mbarrier stages. Two consumer warpgroups each own 64 columns of C (64 rows of Bᵀ,
//    wgmma's M) and the block's BM rows of C (wgmma's N, one m64nBMk8 per k-step). Their threads read their fragments
//    from the stage's MN-major tile of B (lines of 32 floats of one k, 128-byte swizzled, as TMA stores it) with 32-bit
//    shared loads and round them to TF32 (A's floats the tensor cores read by dropping the low bits, as in tc05).
//  * A k-tile's fragments are loaded while the group of the k-tile before is in flight (wgmma may read its registers
//    until it completes), so they are double-buffered; setmaxnreg moves registers from the producer to the consumers
//    for them and the BM / 2 accumulators.
//  * The accumulators hold Cᵀ: each is stored to its place in C, 4 bytes at a time (8 consecutive columns of C, one
//    32-byte sector, per row a warp's store touches).
#include "tc05_tma.cu"

constexpr int RS_K_TILE = 32;  // floats of k per 128-byte line
constexpr int RS_COLUMNS = 128;  // columns of C per block: two consumer warpgroups of 64

// d += A·B for one 64×N×8 step in TF32, A from registers (a thread's 4 of its warp's 16×8 slice: rows g and g + 8,
// k t and t + 4, with g = lane / 4 and t = lane % 4), B K-major in shared memory.
__device__ __forceinline__ void wgmma_m64n128k8_tf32_rs(float (&d)[16][4], const unsigned (&a)[4],
                                                        unsigned long long b) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 " WGMMA_D128 ", {%64, %65, %66, %67}, %68, p, "
                 "1, 1;\n}\n"
                 : WGMMA_D128_OPERANDS(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
}

__device__ __forceinline__ void wgmma_m64n256k8_tf32_rs(float (&d)[32][4], const unsigned (&a)[4],
                                                        unsigned long long b) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 " WGMMA_D256 ", {%128, %129, %130, %131}, "
                 "%132, p, 1, 1;\n}\n"
                 : WGMMA_D256_OPERANDS(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
}

// Element (n, k) of a stage's B tile: RS_COLUMNS / 32 blocks of 32 lines (one k each) of 32 floats, 128-byte swizzled.
__device__ __forceinline__ int b_element(int n, int k) {
    return (n / 32) * 32 * RS_K_TILE + k * 32 + (((n % 32) / 4) ^ (k % 8)) * 4 + n % 4;
}

// A thread's fragments of a k-tile (4 k-steps of 8) for its warp's 16 columns n0.. of C, rounded to TF32.
__device__ __forceinline__ void load_b_fragments(unsigned (&f)[RS_K_TILE / 8][4], const float* bs, int n0, int lane) {
    const int g = lane / 4, t = lane % 4;
#pragma unroll
    for (int s = 0; s < RS_K_TILE / 8; ++s)
#pragma unroll
        for (int e = 0; e < 4; ++e)  // (g, t), (g + 8, t), (g, t + 4), (g + 8, t + 4)
            f[s][e] = __float_as_uint(to_tf32(bs[b_element(n0 + g + (e % 2) * 8, s * 8 + t + (e / 2) * 4)]));
}

// How a consumer warpgroup's accumulators (its 64 columns of C as 64 rows of Cᵀ, the block's BM rows of C as Cᵀ's
// columns) reach C: here each to its place, 4 bytes at a time (8 consecutive columns of C, one 32-byte sector, per row
// a warp's store touches). tc09 stages them in shared memory for TMA stores; smem_bytes() is what it needs there.
struct TransposedStores {
    __device__ static constexpr int smem_bytes() { return 0; }
    // acc[j] holds Cᵀ rows n_warp + g (+ 8), columns 8j + 2t (+ 1): C's rows 8j + 2t (+ 1) at column n_warp + g (+ 8)
    template <int BM>
    __device__ __forceinline__ void store(float* C, const float (&acc)[BM / 8][4], char*, int row0, int col0, int M,
                                          int N, int n_warp, int lane) const {
        const int g = lane / 4, t = lane % 4;
#pragma unroll
        for (int j = 0; j < BM / 8; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int n = col0 + n_warp + g + (e / 2) * 8, m = row0 + j * 8 + 2 * t + e % 2;
                if (m < M && n < N) C[m * N + n] = acc[j][e];
            }
    }
    __device__ __forceinline__ void finish() const {}
};

// The kernel's body; Epilogue: how the consumers store C (TransposedStores, or tc09's staged TMA stores).
template <int BM, int STAGES, int GROUP, class Epilogue>
__device__ __forceinline__ void registers_gemm(int M, int N, int K, const TensorMap& a_map, const TensorMap& b_map,
                                               float* __restrict__ C, const Epilogue& epilogue) {
    constexpr int BK = RS_K_TILE, BN = RS_COLUMNS, A_TILE = BM * BK, B_TILE = BK * BN;
    static_assert(BM == 128 || BM == 256, "one m64nBMk8 per k-step");
    extern __shared__ float4 smem[];
    char* base = reinterpret_cast<char*>(smem);  // aligned by an offset, so the loads stay shared-memory loads
    float* As = reinterpret_cast<float*>(base + (1024 - shared_address(base) % 1024) % 1024);  // [STAGES][BM lines]
    float* Bs = As + STAGES * A_TILE;  // [STAGES][BN / 32 blocks][BK lines]
    char* staging = reinterpret_cast<char*>(Bs + STAGES * B_TILE);  // the epilogue's, 1024-byte aligned
    unsigned long long* full = reinterpret_cast<unsigned long long*>(staging + Epilogue::smem_bytes());
    unsigned long long* empty = full + STAGES;

    const int tiles = CEIL_DIV(M, BM) * CEIL_DIV(N, BN), ktiles = CEIL_DIV(K, BK);
    const int warpgroup = threadIdx.x / 128, warp = threadIdx.x % 128 / 32, lane = threadIdx.x % 32;
    init_stage_barriers<STAGES>(full, empty, 1, 2 * 4);  // full: the TMA thread's expect; empty: every consumer warp

    if (warpgroup == 0) {  // the producer: one thread, few registers
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
        if (threadIdx.x != 0) return;
        int use = 0;
        for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
            const int2 origin = grouped_tile<BM, BN, GROUP>(tile, M, N);
            for (int kt = 0; kt < ktiles; ++kt, ++use) {
                const int stage = use % STAGES, k0 = kt * BK;
                if (use >= STAGES) barrier_wait(empty + stage, (use / STAGES - 1) & 1);
                barrier_expect(full + stage, (A_TILE + B_TILE) * 4);
                tma_load(As + stage * A_TILE, a_map, k0, origin.x, full + stage);
#pragma unroll
                for (int nb = 0; nb < BN / 32; ++nb)
                    tma_load(Bs + stage * B_TILE + nb * 32 * BK, b_map, origin.y + nb * 32, k0, full + stage);
            }
        }
        return;
    }

    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
    const int n_warp = (warpgroup - 1) * 64 + warp * 16;  // the warp's 16 columns of the tile (rows of Bᵀ)
    int use = 0;
    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        const int2 origin = grouped_tile<BM, BN, GROUP>(tile, M, N);
        float acc[BM / 8][4] = {};
        auto k_tile = [&](unsigned (&f)[BK / 8][4], int kt) {
            const int stage = use % STAGES;
            barrier_wait(full + stage, (use / STAGES) & 1);
            load_b_fragments(f, Bs + stage * B_TILE, n_warp, lane);
            asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
            for (int s = 0; s < BK / 8; ++s) {
                const unsigned long long a = swizzled_descriptor(As + stage * A_TILE + s * 8, 16, 1024);
                if constexpr (BM == 256) wgmma_m64n256k8_tf32_rs(reinterpret_cast<float(&)[32][4]>(acc), f[s], a);
                else wgmma_m64n128k8_tf32_rs(reinterpret_cast<float(&)[16][4]>(acc), f[s], a);
            }
            asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
            asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");  // the k-tile before: its stage, registers
            if (kt > 0 && lane == 0) barrier_arrive(empty + (use - 1) % STAGES);
            ++use;
        };
        unsigned fragments[2][BK / 8][4];
        int kt = 0;
        for (; kt + 1 < ktiles; kt += 2) {
            k_tile(fragments[0], kt);
            k_tile(fragments[1], kt + 1);
        }
        if (kt < ktiles) k_tile(fragments[0], kt);
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
        if (ktiles > 0 && lane == 0) barrier_arrive(empty + (use - 1) % STAGES);
        epilogue.template store<BM>(C, acc, staging, origin.x, origin.y, M, N, n_warp, lane);
    }
    epilogue.finish();
}

template <int BM, int STAGES, int GROUP>
__global__ void __launch_bounds__(3 * 128, 1)
tc_registers_tf32(int M, int N, int K, const __grid_constant__ TensorMap a_map, const __grid_constant__ TensorMap b_map,
                  const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C) {
    registers_gemm<BM, STAGES, GROUP>(M, N, K, a_map, b_map, C, TransposedStores());
}

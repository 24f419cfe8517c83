// Rung 14 — Hopper's way to feed FP32 FFMAs (sm_90a): a producer copies the tiles with TMA, and the consumer warps
// do nothing but read shared memory as float4s and multiply.
//  * In rungs 12 and 13 every warp both moves tiles (cp.async: addresses, predicates, the copies themselves) and
//    computes, and the moving takes issue slots from the FFMAs and skews the warps. Here one thread of a producer
//    warpgroup issues two cp.async.bulk.tensor copies per k-tile (A's BM×BK box, B's BK×BN box); the TMA unit computes
//    the addresses and zero-fills what lies outside the matrix, so the consumers test no edge.
//  * Stages are handed over by mbarriers (rung 13's): full[s] completes when the TMA unit has written the bytes it
//    was told to expect, empty[s] when every consumer thread has read its last fragment of the stage.
//  * A stays row-major in shared memory (TMA cannot transpose 4-byte elements), so a consumer reads its rows along k:
//    one float4 holds 4 k-steps of a row. Its 8 rows are 8 apart (lane % 8 + 8i), so the 8 rows a warp reads at once
//    fall in 8 different 16-byte chunks of the banks with TMA's swizzle (BK × 4 bytes wide: 32, 64 or 128), which
//    XORs a row's chunk index with its place in the swizzle's 8-row pattern.
//  * B's BK×BN box is stored as it is: a warp reads 4 consecutive float4s of a row, shared by 8 lanes each.
//  * A thread holds 8×16 accumulators (a warp 64×64); 8 consumer warps tile BM×BN. A warp scheduler's registers are
//    its own, so the block is three warpgroups (the producer's and two of consumers) and setmaxnreg moves registers
//    from the producer (40 a thread) to the consumers (232): room for the accumulators, 4 k-steps of A and two of B.
//  * No fragment is read ahead across k-tiles (rung 13 does): that measured slower here, at 232 registers.
//  * Blocks persist (one per SM) and loop over tiles in grouped order, so the producer fills the next tile's stages
//    while the consumers store the last one's accumulators.
#include "tma.cuh"

template <int BM, int BN, int BK, int STAGES, int GROUP, bool VEC>
__global__ void __launch_bounds__((BM / 64) * (BN / 64) * 32 + 128, 1)
sgemm_warp_specialized(int M, int N, int K, const __grid_constant__ TensorMap a_map,
                       const __grid_constant__ TensorMap b_map, const float* __restrict__ A,
                       const float* __restrict__ B, float* __restrict__ C) {
    constexpr int CONSUMERS = (BM / 64) * (BN / 64) * 32, A_TILE = BM * BK, B_TILE = BK * BN;
    static_assert(BM % 64 == 0 && BN % 64 == 0 && BM <= 256 && BN <= 256, "64×64 warp tiles; 256-row boxes");
    static_assert(BK == 8 || BK == 16 || BK == 32, "A's rows are one TMA swizzle wide: 32, 64 or 128 bytes");
    extern __shared__ float4 smem[];
    // [STAGES][BM][BK] from the first 1024-byte boundary (the swizzle's period), by an offset: a pointer made from an
    // integer would lose the shared window, and every read of it would be a generic load
    float* As = reinterpret_cast<float*>(smem) + (1024 - shared_address(smem) % 1024) % 1024 / 4;
    float* Bs = As + STAGES * A_TILE;  // [STAGES][BK][BN]
    unsigned long long* full = reinterpret_cast<unsigned long long*>(Bs + STAGES * B_TILE);
    unsigned long long* empty = full + STAGES;
    init_stage_barriers<STAGES>(full, empty, 1, CONSUMERS);

    const int tiles = CEIL_DIV(M, BM) * CEIL_DIV(N, BN), ktiles = CEIL_DIV(K, BK);
    if (threadIdx.x >= CONSUMERS) {  // the producer warpgroup: one thread issues every copy
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
        if (threadIdx.x != CONSUMERS) return;
        int use = 0;  // stages filled so far, over all of this block's tiles
        for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
            const int2 origin = grouped_tile<BM, BN, GROUP>(tile, M, N);
            for (int kt = 0; kt < ktiles; ++kt, ++use) {
                const int stage = use % STAGES;
                if (use >= STAGES) barrier_wait(empty + stage, (use / STAGES - 1) & 1);  // its last use released
                barrier_expect(full + stage, (A_TILE + B_TILE) * 4);  // whole boxes, the zero-filled parts too
                tma_load(As + stage * A_TILE, a_map, kt * BK, origin.x, full + stage);
                tma_load(Bs + stage * B_TILE, b_map, origin.y, kt * BK, full + stage);
            }
        }
        return;
    }

    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int wrow = (warp / (BN / 64)) * 64 + lane % 8;    // this thread's rows: wrow + 8i
    const int wcol = (warp % (BN / 64)) * 64 + lane / 8 * 4;  // and columns: wcol + 16j + c
    const int swizzle = (lane % 8 * BK / 32) & (BK / 4 - 1);  // the chunk XOR of its rows (all 8 share it)
    int use = 0;
    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        const int2 origin = grouped_tile<BM, BN, GROUP>(tile, M, N);
        float acc[8][16] = {};
        for (int kt = 0; kt < ktiles; ++kt, ++use) {
            const int stage = use % STAGES;
            barrier_wait(full + stage, (use / STAGES) & 1);
            const float* as = As + stage * A_TILE + wrow * BK;
            const float* bs = Bs + stage * B_TILE + wcol;
#pragma unroll
            for (int q = 0; q < BK / 4; ++q) {  // 4 k-steps: one float4 of each of the thread's rows of A
                float4 a[8];
#pragma unroll
                for (int i = 0; i < 8; ++i) a[i] = lds4(as + i * 8 * BK + (q ^ swizzle) * 4);
#pragma unroll
                for (int kk = 0; kk < 4; ++kk) {
                    float4 b[4];
#pragma unroll
                    for (int j = 0; j < 4; ++j) b[j] = lds4(bs + (4 * q + kk) * BN + 16 * j);
                    // row by row: a thread's value of A is a register of a float4 that changes with the k-step, so
                    // under one (reused) value only B's operands vary, whose register banks repeat every k-step. Column
                    // by column (rung 12's order) measured slower on an H200, with Nsight Compute's dispatch stalls.
#pragma unroll
                    for (int i = 0; i < 8; ++i) {
                        const float ai = component(a[i], kk);
#pragma unroll
                        for (int j = 0; j < 4; ++j) {
                            acc[i][4 * j + 0] += ai * b[j].x;
                            acc[i][4 * j + 1] += ai * b[j].y;
                            acc[i][4 * j + 2] += ai * b[j].z;
                            acc[i][4 * j + 3] += ai * b[j].w;
                        }
                    }
                }
            }
            barrier_arrive(empty + stage);  // this thread has read the stage
        }
        store_thread_tile<8, 4, 0, 8, 16, VEC>(C, acc, origin.x + wrow, origin.y + wcol, M, N);
    }
}

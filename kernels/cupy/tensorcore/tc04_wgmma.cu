// Tensor-core rung 4 — wgmma (sm_90a): warpgroup MMAs with both operands read from 128-byte-swizzled shared memory
// (BF16).
//  * A warpgroup (4 warps, 128 threads) issues wgmma.mma_async.m64n128k16: a 64×128×16 product per instruction, its
//    operands read by the tensor cores straight from shared memory through matrix descriptors, where mma.sync needs
//    every fragment in registers first (ldmatrix). BM / 64 warpgroups stack along M; BN / 128 instructions per k-step.
//  * K-tiles of 64 bfloat16, 128 bytes a row, in the layouts wgmma reads with the 128-byte swizzle (a 16-byte chunk c
//    of 128-byte line l stored at chunk c ^ (l % 8), so the 8 lines of a core matrix hit distinct banks): A K-major,
//    one row of A per line; B as stored in memory, MN-major, 64 columns of one k per line, read transposed
//    (imm-trans-b = 1, which 16-bit types allow). Tiles start 1024-byte aligned (the swizzle acts on address bits).
//  * Filled by rung 10's kind of cp.async pipeline: 16-byte copies to their swizzled places (element by element where
//    rows are not 16-byte aligned), then fence.proxy.async so that the tensor cores' async proxy sees what the copies
//    wrote, and one barrier per k-tile.
//  * One k-tile's wgmma group stays in flight while the next is issued (wait_group 1), so the tensor cores do not
//    drain at every tile: the copies run STAGES - 2 tiles ahead, into the buffer of the tile two back, whose group
//    every warpgroup has waited for before the barrier.
//  * The accumulators are laid out as mma.sync's 16×8 tiles, 16 per instruction: tc02's store writes them.
#include "tc03_cp_async.cu"

constexpr int WGMMA_K_TILE = 64;  // bfloat16 per 128-byte line

// A matrix descriptor for the 128-byte swizzle: start address, leading and stride byte offsets (in 16 bytes).
__device__ __forceinline__ unsigned long long swizzled_descriptor(const void* tile, int leading_bytes, int stride_bytes) {
    const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(tile));
    return static_cast<unsigned long long>((address & 0x3FFFF) >> 4) |
           static_cast<unsigned long long>(leading_bytes >> 4) << 16 |
           static_cast<unsigned long long>(stride_bytes >> 4) << 32 | 1ull << 62;
}

// The accumulators of a 64×N wgmma, N = 128 or 256: N / 2 registers a thread, in mma.sync's 16×8 tile order, as the
// instruction's first operands (%0 …) and as the asm's outputs, 16 of 16×8 tiles (64 registers) at a time.
#define WGMMA_REGS_0 \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define WGMMA_REGS_64 \
    "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
    "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, " \
    "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
    "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
#define WGMMA_D128 "{" WGMMA_REGS_0 "}"
#define WGMMA_D256 "{" WGMMA_REGS_0 ", " WGMMA_REGS_64 "}"
#define WGMMA_TILES16(d, i) \
    "+f"(d[(i) + 0][0]), "+f"(d[(i) + 0][1]), "+f"(d[(i) + 0][2]), "+f"(d[(i) + 0][3]), "+f"(d[(i) + 1][0]), "+f"(d[(i) + 1][1]), "+f"(d[(i) + 1][2]), "+f"(d[(i) + 1][3]), \
    "+f"(d[(i) + 2][0]), "+f"(d[(i) + 2][1]), "+f"(d[(i) + 2][2]), "+f"(d[(i) + 2][3]), "+f"(d[(i) + 3][0]), "+f"(d[(i) + 3][1]), "+f"(d[(i) + 3][2]), "+f"(d[(i) + 3][3]), \
    "+f"(d[(i) + 4][0]), "+f"(d[(i) + 4][1]), "+f"(d[(i) + 4][2]), "+f"(d[(i) + 4][3]), "+f"(d[(i) + 5][0]), "+f"(d[(i) + 5][1]), "+f"(d[(i) + 5][2]), "+f"(d[(i) + 5][3]), \
    "+f"(d[(i) + 6][0]), "+f"(d[(i) + 6][1]), "+f"(d[(i) + 6][2]), "+f"(d[(i) + 6][3]), "+f"(d[(i) + 7][0]), "+f"(d[(i) + 7][1]), "+f"(d[(i) + 7][2]), "+f"(d[(i) + 7][3]), \
    "+f"(d[(i) + 8][0]), "+f"(d[(i) + 8][1]), "+f"(d[(i) + 8][2]), "+f"(d[(i) + 8][3]), "+f"(d[(i) + 9][0]), "+f"(d[(i) + 9][1]), "+f"(d[(i) + 9][2]), "+f"(d[(i) + 9][3]), \
    "+f"(d[(i) + 10][0]), "+f"(d[(i) + 10][1]), "+f"(d[(i) + 10][2]), "+f"(d[(i) + 10][3]), "+f"(d[(i) + 11][0]), "+f"(d[(i) + 11][1]), "+f"(d[(i) + 11][2]), "+f"(d[(i) + 11][3]), \
    "+f"(d[(i) + 12][0]), "+f"(d[(i) + 12][1]), "+f"(d[(i) + 12][2]), "+f"(d[(i) + 12][3]), "+f"(d[(i) + 13][0]), "+f"(d[(i) + 13][1]), "+f"(d[(i) + 13][2]), "+f"(d[(i) + 13][3]), \
    "+f"(d[(i) + 14][0]), "+f"(d[(i) + 14][1]), "+f"(d[(i) + 14][2]), "+f"(d[(i) + 14][3]), "+f"(d[(i) + 15][0]), "+f"(d[(i) + 15][1]), "+f"(d[(i) + 15][2]), "+f"(d[(i) + 15][3])
#define WGMMA_D128_OPERANDS(d) WGMMA_TILES16(d, 0)
#define WGMMA_D256_OPERANDS(d) WGMMA_TILES16(d, 0), WGMMA_TILES16(d, 16)

// d += A·B for one 64×128×16 step of a warpgroup; A K-major, B MN-major (transposed), both swizzled.
__device__ __forceinline__ void wgmma_m64n128k16(float (&d)[16][4], unsigned long long a, unsigned long long b) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " WGMMA_D128 ", %64, %65, p, 1, 1, 0, 1;\n}\n"
                 : WGMMA_D128_OPERANDS(d)
                 : "l"(a), "l"(b));
}

// Element (row, col) of a tile whose 128-byte lines hold 64 bfloat16: its offset in elements, swizzled. A (K-major):
// line = row of A, col along k. B (MN-major): lines of 64 columns, one k each, 64 lines per 64-column block.
__device__ __forceinline__ int swizzled(int line, int col) {
    return line * WGMMA_K_TILE + (((col / 8) ^ (line % 8)) * 8) + col % 8;
}

// A ROWS×COLS tile of a row-major bfloat16 matrix into swizzled lines. VEC: 16-byte cp.async of 8 elements (rows
// 16-byte aligned), else element by element (tc02's copy_elements).
template <int ROWS, int COLS, int THREADS, bool VEC, bool MN_MAJOR>
__device__ __forceinline__ void copy_swizzled(unsigned short* s, const unsigned short* g, int ld, int rows_left,
                                              int cols_left) {
    // K-major (A): line = row, a row of 64 per line. MN-major (B): line = (col / 64)·ROWS + row.
    auto at = [](int r, int c) { return MN_MAJOR ? swizzled((c / 64) * ROWS + r, c % 64) : swizzled(r, c); };
    if constexpr (VEC) {
        constexpr int CHUNKS = COLS / 8;
        for (int i = threadIdx.x; i < ROWS * CHUNKS; i += THREADS) {
            const int r = i / CHUNKS, c = (i % CHUNKS) * 8;
            const bool inside = r < rows_left && c < cols_left;
            cp_async16(reinterpret_cast<float*>(s + at(r, c)), reinterpret_cast<const float*>(inside ? g + r * ld + c : g),
                       inside);
        }
    } else {
        copy_elements<ROWS, COLS, THREADS>(s, g, ld, rows_left, cols_left, at);
    }
}

template <int BM, int BN, int STAGES, int GROUP, bool VEC>
__global__ void __launch_bounds__(BM / 64 * 128)
tc_wgmma_bf16(int M, int N, int K, const unsigned short* __restrict__ A, const unsigned short* __restrict__ B,
              float* __restrict__ C) {
    constexpr int BK = WGMMA_K_TILE, THREADS = BM / 64 * 128, NB = BN / 128;
    constexpr int A_TILE = BM * BK, B_TILE = BK * BN;  // elements; both multiples of 512 (1024 bytes)
    constexpr int AHEAD = STAGES - 2;  // tiles copied ahead: one buffer is being read, one by the group in flight
    static_assert(BM % 64 == 0 && BN % 128 == 0 && STAGES >= 3, "whole warpgroup tiles, a buffer per group in flight");
    extern __shared__ float4 smem[];
    unsigned short* tiles = reinterpret_cast<unsigned short*>(
        (reinterpret_cast<size_t>(smem) + 1023) / 1024 * 1024);  // 1 KiB of slack is allocated for this
    unsigned short* As = tiles;                   // [STAGES][BM lines]
    unsigned short* Bs = tiles + STAGES * A_TILE;  // [STAGES][BN / 64 blocks][BK lines]

    const int2 origin = grouped_tile_origin<BM, BN, GROUP>(M, N);
    const int row0 = origin.x, col0 = origin.y;
    const int warpgroup = threadIdx.x / 128, warp = threadIdx.x % 128 / 32, lane = threadIdx.x % 32;
    const int ktiles = CEIL_DIV(K, BK);

    auto issue = [&](int kt) {
        if (kt < ktiles) {
            const int stage = kt % STAGES, k0 = kt * BK;
            copy_swizzled<BM, BK, THREADS, VEC, false>(As + stage * A_TILE, A + row0 * K + k0, K, M - row0, K - k0);
            copy_swizzled<BK, BN, THREADS, VEC, true>(Bs + stage * B_TILE, B + k0 * N + col0, N, K - k0, N - col0);
        }
        cp_async_commit();  // an empty group past the end keeps the wait count uniform
    };

#pragma unroll
    for (int kt = 0; kt < AHEAD; ++kt) issue(kt);

    float acc[NB][16][4] = {};
    for (int kt = 0; kt < ktiles; ++kt) {
        cp_async_wait<AHEAD - 1>();  // tile kt has landed (for this thread) ...
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // ... where the tensor cores look
        __syncthreads();                                               // ... for every thread
        issue(kt + AHEAD);  // into the buffer of tile kt - 2, whose wgmmas every warpgroup has waited for
        const unsigned short* as = As + (kt % STAGES) * A_TILE + warpgroup * 64 * BK;
        const unsigned short* bs = Bs + (kt % STAGES) * B_TILE;
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
        for (int k = 0; k < BK / 16; ++k) {
            // A: 8-row groups 1024 bytes apart, the k-step 32 bytes into the (swizzled) line. B: 64-column blocks
            // BK lines apart, 8-k groups 1024 bytes apart, the k-step 16 lines (2048 bytes) on.
            const unsigned long long a = swizzled_descriptor(as + k * 16, 16, 1024);
#pragma unroll
            for (int nb = 0; nb < NB; ++nb)
                wgmma_m64n128k16(acc[nb], a, swizzled_descriptor(bs + nb * 2 * BK * 64 + k * 16 * 64, BK * 128, 1024));
        }
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");  // tile kt - 1's group is done
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    store_accumulators<VEC>(C, reinterpret_cast<float(&)[1][BN / 8][4]>(acc), row0 + warpgroup * 64 + warp * 16, col0,
                            M, N, lane);
}

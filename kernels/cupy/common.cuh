// Helpers shared by every rung. Row-major FP32: C[M][N] = A[M][K] · B[K][N].
// Every kernel takes (M, N, K, A, B, C) and handles any M, N, K: loads outside the matrix read zero and
// stores outside it are dropped. Offsets are int: the Python side declares shapes with ≥ 2^31 elements unsupported.
#pragma once

#define CEIL_DIV(a, b) (((a) + (b) - 1) / (b))

__device__ __forceinline__ float load_or_zero(const float* p, int row, int col, int rows, int cols, int ld) {
    return (row < rows && col < cols) ? p[row * ld + col] : 0.0f;
}

// Four consecutive floats of one row. VEC: one 16-byte load when the whole float4 is inside (the caller
// guarantees ld % 4 == 0 and col % 4 == 0, so it is aligned); otherwise element by element.
template <bool VEC>
__device__ __forceinline__ float4 load4(const float* p, int row, int col, int rows, int cols, int ld) {
    if (VEC && row < rows && col + 3 < cols) return *reinterpret_cast<const float4*>(p + row * ld + col);
    return make_float4(load_or_zero(p, row, col, rows, cols, ld), load_or_zero(p, row, col + 1, rows, cols, ld),
                       load_or_zero(p, row, col + 2, rows, cols, ld), load_or_zero(p, row, col + 3, rows, cols, ld));
}

template <bool VEC>
__device__ __forceinline__ void store4(float* p, int row, int col, int rows, int cols, int ld, float4 v) {
    if (row >= rows) return;
    if (VEC && col + 3 < cols) {
        *reinterpret_cast<float4*>(p + row * ld + col) = v;
        return;
    }
    const float e[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i)
        if (col + i < cols) p[row * ld + col + i] = e[i];
}

// A thread's accumulators into C, as float4s along rows: acc[i][j] goes to row row0 + (i / TM)·SUB_ROWS + (i % TM)·
// ROW_STEP and column col0 + (j / TN)·SUB_COLS + j % TN (a warp tile's WMITER×WNITER sub-tiles of TM×TN each).
template <int TM, int TN, int SUB_ROWS, int ROW_STEP, int SUB_COLS, bool VEC, int ROWS, int COLS>
__device__ __forceinline__ void store_thread_tile(float* C, const float (&acc)[ROWS][COLS], int row0, int col0, int M,
                                                  int N) {
    static_assert(TN % 4 == 0, "a thread's columns are stored as float4s");
#pragma unroll
    for (int i = 0; i < ROWS; ++i)
#pragma unroll
        for (int j = 0; j < COLS; j += 4)
            store4<VEC>(C, row0 + (i / TM) * SUB_ROWS + (i % TM) * ROW_STEP, col0 + (j / TN) * SUB_COLS + j % TN, M, N,
                        N, make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]));
}

// A ROWS×COLS tile of a row-major matrix into shared memory (row stride LD), all THREADS threads cooperating.
template <int ROWS, int COLS, int THREADS, int LD>
__device__ __forceinline__ void load_tile(float* s, const float* g, int row0, int col0, int rows, int cols, int ld) {
#pragma unroll
    for (int it = 0; it < CEIL_DIV(ROWS * COLS, THREADS); ++it) {
        const int i = it * THREADS + threadIdx.x;
        if ((ROWS * COLS) % THREADS == 0 || i < ROWS * COLS)
            s[(i / COLS) * LD + i % COLS] = load_or_zero(g, row0 + i / COLS, col0 + i % COLS, rows, cols, ld);
    }
}

// Same, as float4s (COLS % 4 == 0): 16-byte global loads and 16-byte shared stores.
template <int ROWS, int COLS, int THREADS, int LD, bool VEC>
__device__ __forceinline__ void load_tile4(float* s, const float* g, int row0, int col0, int rows, int cols, int ld) {
    constexpr int C4 = COLS / 4;
#pragma unroll
    for (int it = 0; it < CEIL_DIV(ROWS * C4, THREADS); ++it) {
        const int i = it * THREADS + threadIdx.x;
        if ((ROWS * C4) % THREADS == 0 || i < ROWS * C4)
            *reinterpret_cast<float4*>(s + (i / C4) * LD + (i % C4) * 4) =
                load4<VEC>(g, row0 + i / C4, col0 + (i % C4) * 4, rows, cols, ld);
    }
}

// A ROWS×COLS tile stored transposed (s[col][row]): the inner loop then reads a thread's rows of A as float4s.
// LAYOUT maps (k, m) to the shared-memory index, so a rung can pad or swizzle the transposed tile.
template <int ROWS, int COLS, int THREADS, class LAYOUT, bool VEC>
__device__ __forceinline__ void load_tile4_transposed(float* s, const float* g, int row0, int col0, int rows,
                                                      int cols, int ld) {
    constexpr int C4 = COLS / 4;
#pragma unroll
    for (int it = 0; it < CEIL_DIV(ROWS * C4, THREADS); ++it) {
        const int i = it * THREADS + threadIdx.x;
        if ((ROWS * C4) % THREADS != 0 && i >= ROWS * C4) break;
        const int r = i / C4, c = (i % C4) * 4;
        const float4 v = load4<VEC>(g, row0 + r, col0 + c, rows, cols, ld);
        s[LAYOUT::at(c + 0, r)] = v.x;
        s[LAYOUT::at(c + 1, r)] = v.y;
        s[LAYOUT::at(c + 2, r)] = v.z;
        s[LAYOUT::at(c + 3, r)] = v.w;
    }
}

__device__ __forceinline__ float4 lds4(const float* s) { return *reinterpret_cast<const float4*>(s); }

// One component of a float4 by a compile-time index (after unrolling), without going through local memory.
__device__ __forceinline__ float component(float4 v, int i) { return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w; }

// The harness's own kernels for the checks: fresh operand content from a key (splitmix64 of the element's index),
// Freivalds' matrix-vector products in float64 (a warp per row, the matrix read once for M·v and M²·w), their
// residuals (one block per launch), and a keyed hash of a buffer's words. The kernels of a sample's sets take one
// launch for all of them (devices.Sets): blockIdx.y (the residuals: blockIdx.x) is the set, its matrices reached
// through a table of pointers, its vectors at a pitch (0: one vector for every set).
__device__ __forceinline__ unsigned long long mix(unsigned long long z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
constexpr unsigned long long GOLDEN = 0x9E3779B97F4A7C15ull;
constexpr unsigned long long KEYS_PER_LAUNCH = 16;  // devices.KEYS_PER_LAUNCH
// devices.set_key: input `index` of set `set`, from the sample's one key
__device__ __forceinline__ unsigned long long set_key(unsigned long long base, unsigned long long set,
                                                      unsigned long long index) {
    return mix(base + (set * KEYS_PER_LAUNCH + index + 1) * GOLDEN);
}
__device__ __forceinline__ float uniform(unsigned long long key, unsigned long long i) {
    return (float)(mix(key + (i + 1) * GOLDEN) >> 40) * 0x1p-23f - 1.0f;  // 24 bits: exact in fp32
}
__device__ __forceinline__ void put(float* x, unsigned long long i, float v) { x[i] = v; }
__device__ __forceinline__ void put(unsigned short* x, unsigned long long i, float v) {
    const unsigned int bits = __float_as_uint(v);
    x[i] = (unsigned short)((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);  // round to nearest even
}
template <typename T> __device__ void fill(T* x, unsigned long long n, unsigned long long key) {
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) put(x, i, uniform(key, i));
}
extern "C" __global__ void fill_f32(float* x, unsigned long long n, unsigned long long key) { fill(x, n, key); }
extern "C" __global__ void fill_bf16(unsigned short* x, unsigned long long n, unsigned long long key) {
    fill(x, n, key);
}
extern "C" __global__ void fill_sets_f32(float* const* xs, unsigned long long n, unsigned long long base,
                                         unsigned long long index) {
    fill(xs[blockIdx.y], n, set_key(base, blockIdx.y, index));
}
extern "C" __global__ void fill_sets_bf16(unsigned short* const* xs, unsigned long long n, unsigned long long base,
                                          unsigned long long index) {
    fill(xs[blockIdx.y], n, set_key(base, blockIdx.y, index));
}
extern "C" __global__ void poison_sets(float* const* outs, unsigned long long n) {
    float* out = outs[blockIdx.y];
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) out[i] = __int_as_float(0x7fc00000);
}
// each set's x of random signs (pitch n), and `ones` written anew for each test (a scratch vector the harness reuses)
extern "C" __global__ void signs_sets(double* x, double* ones, unsigned long long n, unsigned long long base,
                                      unsigned long long index) {
    const unsigned long long key = set_key(base, blockIdx.y, index);
    x += blockIdx.y * n;
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        x[i] = (mix(key ^ (i * 0xD6E8FEB86659FD93ull)) & 1) ? 1.0 : -1.0;
        ones[i] = 1.0;
    }
}
template <typename T> __device__ __forceinline__ double wide(T v);
template <> __device__ __forceinline__ double wide<float>(float v) { return v; }
template <> __device__ __forceinline__ double wide<unsigned short>(unsigned short v) {
    return __uint_as_float((unsigned int)v << 16);
}
// each set's (m·v, (m∘m)·w) in float64, into mv and m2w (pitch rows)
template <typename T>
__device__ void matvec2(const T* const* ms, long long rows, long long cols, const double* v, long long v_pitch,
                        const double* w, long long w_pitch, double* mv, double* m2w) {
    const long long row = (blockIdx.x * (long long)blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x & 31;
    if (row >= rows) return;
    const T* m = ms[blockIdx.y];
    v += blockIdx.y * v_pitch;
    w += blockIdx.y * w_pitch;
    double a = 0.0, b = 0.0;
    for (long long j = lane; j < cols; j += 32) {
        const double x = wide<T>(m[row * cols + j]);
        a += x * v[j];
        b += x * x * w[j];
    }
    for (int offset = 16; offset; offset >>= 1) {
        a += __shfl_down_sync(0xffffffffu, a, offset);
        b += __shfl_down_sync(0xffffffffu, b, offset);
    }
    if (lane == 0) { mv[blockIdx.y * rows + row] = a; m2w[blockIdx.y * rows + row] = b; }
}
extern "C" __global__ void matvec2_f32(const float* const* ms, long long rows, long long cols, const double* v,
                                       long long v_pitch, const double* w, long long w_pitch, double* mv,
                                       double* m2w) {
    matvec2<float>(ms, rows, cols, v, v_pitch, w, w_pitch, mv, m2w);
}
extern "C" __global__ void matvec2_bf16(const unsigned short* const* ms, long long rows, long long cols,
                                        const double* v, long long v_pitch, const double* w, long long w_pitch,
                                        double* mv, double* m2w) {
    matvec2<unsigned short>(ms, rows, cols, v, v_pitch, w, w_pitch, mv, m2w);
}
// each set's residuals (y, z, s2 at pitch n), into its row of `into` (two numbers each)
extern "C" __global__ void residuals(const double* y, const double* z, const double* s2, long long n,
                                     double* into) {
    __shared__ double top[32], dd[32], zz[32];
    y += blockIdx.x * n;
    z += blockIdx.x * n;
    s2 += blockIdx.x * n;
    into += 2 * blockIdx.x;
    double t = 0.0, d2 = 0.0, z2 = 0.0;
    bool nan = false;
    for (long long i = threadIdx.x; i < n; i += blockDim.x) {
        const double d = y[i] - z[i];
        const double r = fabs(d) / sqrt(s2[i] > 0.0 ? s2[i] : 2.2250738585072014e-308);
        nan |= (r != r);
        t = fmax(t, r);
        d2 += d * d;
        z2 += z[i] * z[i];
    }
    if (nan) t = __longlong_as_double(0x7ff8000000000000ll);  // fmax drops NaN; a NaN row must fail
    for (int offset = 16; offset; offset >>= 1) {
        const double o = __shfl_down_sync(0xffffffffu, t, offset);
        t = (o != o || t != t) ? o + t : fmax(t, o);
        d2 += __shfl_down_sync(0xffffffffu, d2, offset);
        z2 += __shfl_down_sync(0xffffffffu, z2, offset);
    }
    if ((threadIdx.x & 31) == 0) { top[threadIdx.x / 32] = t; dd[threadIdx.x / 32] = d2; zz[threadIdx.x / 32] = z2; }
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int w = 1; w < blockDim.x / 32; ++w) {
            t = (top[w] != top[w] || t != t) ? top[w] + t : fmax(t, top[w]);
            d2 += dd[w];
            z2 += zz[w];
        }
        into[0] = t;
        into[1] = sqrt(d2) / (z2 > 0.0 ? sqrt(z2) : 1.0);
    }
}
extern "C" __global__ void digest(const unsigned int* words, unsigned long long n, unsigned long long salt,
                                  unsigned long long* sum) {
    unsigned long long acc = 0;
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) acc += mix(((i << 32) | words[i]) ^ salt);
    for (int offset = 16; offset; offset >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, offset);
    if ((threadIdx.x & 31) == 0) atomicAdd(sum, acc);
}

// Device kernels of the GPU backend, compiled at start with NVRTC for the
// device's own architecture (src/backend/gpu/compile.rs).
//
// Exactness: the sweep evaluates every expression in the order the
// specification writes it (left to right, as the CPU kernel does) and the
// program is compiled with --fmad=false, so no multiply-add is contracted and
// the new p is bitwise equal to the CPU's. Squared residuals are squared in
// float and widened to double, as on the CPU; only the order of the double
// summation differs.
//
// Layout: every field has the block's local extents d0 x d1 x d2 (k = d2
// fastest). Offsets are 64-bit: a single rank's field may exceed 2^31 values.
//
// Launch constants come from src/backend/gpu/launch.rs as -D definitions
// (launch::defines), the one place they are set; the emulated CUDA driver
// (scripts/cuda-emu.sh) compiles this file for the host with the same ones.

#if !defined(HIMENO_WARP) || !defined(HIMENO_SWEEP_THREADS) || \
    !defined(HIMENO_SWEEP_MIN_BLOCKS) || !defined(HIMENO_MAX_WARPS)
#error "compile with the -D definitions of launch::defines (src/backend/gpu/launch.rs)"
#endif

static_assert(HIMENO_WARP == 32, "the shuffle masks below name 32 lanes");
static_assert(HIMENO_SWEEP_THREADS % HIMENO_WARP == 0, "sweep blocks are whole warps");
static_assert(HIMENO_SWEEP_THREADS / HIMENO_WARP <= HIMENO_MAX_WARPS, "block_sum's array");

// The sweep's register budget: at least HIMENO_SWEEP_MIN_BLOCKS blocks of
// HIMENO_SWEEP_THREADS per multiprocessor when that is set (the
// --gpu-occupancy variants), else the compiler's own choice (no bounds: a
// maximum thread count alone lets it take more registers, 79 instead of 72
// with NVRTC 12.9 and 13.0 for sm_90, for the same 3 resident blocks).
#if HIMENO_SWEEP_MIN_BLOCKS > 0
#define SWEEP_BOUNDS __launch_bounds__(HIMENO_SWEEP_THREADS, HIMENO_SWEEP_MIN_BLOCKS)
#else
#define SWEEP_BOUNDS
#endif

// Sums `v` over the thread block in a fixed order, so the result does not
// vary between runs: a shuffle tree within each warp (lane l adds lane
// l + off, off halving from half a warp down to 1), then the same tree
// over the warp sums in warp order. Threads are numbered threadIdx.y *
// blockDim.x + threadIdx.x. Every thread of the block must call it; the
// block sum is returned to thread 0.
__device__ double block_sum(double v)
{
    __shared__ double warp_sums[HIMENO_MAX_WARPS];
    const unsigned t = threadIdx.y * blockDim.x + threadIdx.x;
    const unsigned lane = t % HIMENO_WARP;
    const unsigned warp = t / HIMENO_WARP;
    const unsigned warps = (blockDim.x * blockDim.y + HIMENO_WARP - 1) / HIMENO_WARP;
    for (int off = HIMENO_WARP / 2; off > 0; off >>= 1) {
        v += __shfl_down_sync(0xffffffffu, v, off);
    }
    if (lane == 0) {
        warp_sums[warp] = v;
    }
    __syncthreads();
    double s = 0.0;
    if (warp == 0) {
        s = lane < warps ? warp_sums[lane] : 0.0;
        for (int off = HIMENO_WARP / 2; off > 0; off >>= 1) {
            s += __shfl_down_sync(0xffffffffu, s, off);
        }
    }
    return s;
}

// One Jacobi sweep over a box of owned points: local indices
// [i0, i0+ni) x [j0, j0+nj) x [k0, k0+nk). A thread block covers a tile of
// blockDim.x k-values by blockDim.y j-values and marches through `planes`
// consecutive i-planes, so p's i-neighbours stay in registers. The tile is
// a warp wide in k where the box allows (coalesced rows); thin boxes get
// tiles of other shapes with the same thread count (launch::tile). Each
// block writes its sum of squared residuals to partial[blockIdx.x].
//
// The grid is one-dimensional: block b covers k-tile b % nkb, j-tile
// (b / nkb) % njb and i-chunk b / (nkb * njb).
extern "C" __global__ void SWEEP_BOUNDS sweep(
    const float* __restrict__ p, float* __restrict__ out,
    const float* __restrict__ a0, const float* __restrict__ a1,
    const float* __restrict__ a2, const float* __restrict__ a3,
    const float* __restrict__ b0, const float* __restrict__ b1,
    const float* __restrict__ b2, const float* __restrict__ c0,
    const float* __restrict__ c1, const float* __restrict__ c2,
    const float* __restrict__ bnd, const float* __restrict__ wrk1,
    float omega, long long d1, long long d2,
    int i0, int j0, int k0, int ni, int nj, int nk,
    int planes, int nkb, int njb, double* __restrict__ partial)
{
    const int b = blockIdx.x;
    const int kt = b % nkb;
    const int jt = (b / nkb) % njb;
    const int it = b / (nkb * njb);
    const int k = k0 + kt * blockDim.x + threadIdx.x;
    const int j = j0 + jt * blockDim.y + threadIdx.y;
    const int ifirst = i0 + it * planes;
    const int iend = min(ifirst + planes, i0 + ni);
    const long long di = d1 * d2;
    const long long dj = d2;
    double g = 0.0;
    if (k < k0 + nk && j < j0 + nj && ifirst < iend) {
        long long c = ((long long)ifirst * d1 + j) * d2 + k;
        float pm = p[c - di];
        float pc = p[c];
        for (int i = ifirst; i < iend; ++i, c += di) {
            const float pp = p[c + di];
            const float s0 = a0[c] * pp
                + a1[c] * p[c + dj]
                + a2[c] * p[c + 1]
                + b0[c] * (p[c + di + dj] - p[c + di - dj] - p[c - di + dj] + p[c - di - dj])
                + b1[c] * (p[c + dj + 1] - p[c - dj + 1] - p[c + dj - 1] + p[c - dj - 1])
                + b2[c] * (p[c + di + 1] - p[c - di + 1] - p[c + di - 1] + p[c - di - 1])
                + c0[c] * pm
                + c1[c] * p[c - dj]
                + c2[c] * p[c - 1]
                + wrk1[c];
            const float ss = (s0 * a3[c] - pc) * bnd[c];
            const float sq = ss * ss;
            g += (double)sq;
            out[c] = pc + omega * ss;
            pm = pc;
            pc = pp;
        }
    }
    const double s = block_sum(g);
    if (threadIdx.x == 0 && threadIdx.y == 0) {
        partial[b] = s;
    }
}

// Sums partial[0..n) into *out in a fixed order. Launched with one block.
extern "C" __global__ void reduce_partials(
    const double* __restrict__ partial, long long n, double* __restrict__ out)
{
    double v = 0.0;
    for (long long x = threadIdx.x; x < n; x += blockDim.x) {
        v += partial[x];
    }
    const double s = block_sum(v);
    if (threadIdx.x == 0) {
        *out = s;
    }
}

// Offset of element (a, b) of plane `plane` normal to dimension `dim`, where
// (a, b) run over the other two dimensions in increasing order (the order
// the CPU backend and the host buffers use).
__device__ __forceinline__ long long face_offset(
    int dim, long long plane, long long a, long long b, long long d1, long long d2)
{
    if (dim == 0) {
        return (plane * d1 + a) * d2 + b;
    }
    if (dim == 1) {
        return (a * d1 + plane) * d2 + b;
    }
    return (a * d1 + b) * d2 + plane;
}

// Copies plane `plane` of `f` normal to `dim` into the contiguous buffer
// `buf` of n = na * nb values.
extern "C" __global__ void pack_face(
    const float* __restrict__ f, float* __restrict__ buf, int dim, long long plane,
    long long nb, long long n, long long d1, long long d2)
{
    for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < n;
         t += (long long)gridDim.x * blockDim.x) {
        buf[t] = f[face_offset(dim, plane, t / nb, t % nb, d1, d2)];
    }
}

// Copies the contiguous buffer `buf` into plane `plane` of `f` normal to
// `dim` (the reverse of pack_face).
extern "C" __global__ void unpack_face(
    float* __restrict__ f, const float* __restrict__ buf, int dim, long long plane,
    long long nb, long long n, long long d1, long long d2)
{
    for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < n;
         t += (long long)gridDim.x * blockDim.x) {
        f[face_offset(dim, plane, t / nb, t % nb, d1, d2)] = buf[t];
    }
}

// Sets f[x] = v for every x < n.
extern "C" __global__ void fill(float* __restrict__ f, long long n, float v)
{
    for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < n;
         t += (long long)gridDim.x * blockDim.x) {
        f[t] = v;
    }
}

// Sets every value of i-plane i of f to by_plane[i]; a plane holds
// `plane_len` values and there are n values in all.
extern "C" __global__ void fill_planes(
    float* __restrict__ f, const float* __restrict__ by_plane, long long plane_len,
    long long n)
{
    for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < n;
         t += (long long)gridDim.x * blockDim.x) {
        f[t] = by_plane[t / plane_len];
    }
}

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
    !defined(HIMENO_SWEEP_MIN_BLOCKS) || !defined(HIMENO_MAX_WARPS) || \
    !defined(HIMENO_REDUCE_THREADS)
#error "compile with the -D definitions of launch::defines (src/backend/gpu/launch.rs)"
#endif

static_assert(HIMENO_WARP == 32, "the shuffle masks below name 32 lanes");
static_assert(HIMENO_SWEEP_THREADS % HIMENO_WARP == 0, "sweep blocks are whole warps");
static_assert(HIMENO_SWEEP_THREADS / HIMENO_WARP <= HIMENO_MAX_WARPS, "block_sum's array");
static_assert(HIMENO_REDUCE_THREADS / HIMENO_WARP <= HIMENO_MAX_WARPS, "fixed_sum's array");
static_assert(HIMENO_REDUCE_THREADS % HIMENO_SWEEP_THREADS == 0,
              "a sweep block plays the reduction's threads in whole rounds");

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

// __noinline__ for NVRTC; the emulator's host compiler spells it its own
// way (a macro named __noinline__ would break the C++ library's headers).
#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
#define NOT_INLINED __noinline__
#else
#define NOT_INLINED __attribute__((noinline))
#endif

// Sums partial[0..n) in the one fixed order of the reduction over
// HIMENO_REDUCE_THREADS threads: thread x adds partial[x], partial[x + R],
// ... in turn (R = HIMENO_REDUCE_THREADS), then block_sum's trees over
// those R sums (lanes within each warp of 32, then the R / 32 warp sums in
// warp order). A block of fewer threads plays the R threads in rounds:
// thread t plays x = t, t + blockDim, ..., which fall on lane t % 32 of
// warps t / 32, t / 32 + blockDim / 32, ..., so every shuffle adds the same
// two values as with R threads, and the sum is bitwise the same whatever
// the block's size (a divisor of R). `partial` is volatile: in the sweep,
// the other blocks' sums are read after their ticket, never from a stale
// cache line. Every thread of the block must call it; the sum is returned
// to thread 0. Not inlined: in the sweeps, its code after the march made
// the assembler give the whole kernel fewer registers (32 instead of 72 for
// `sweep` with NVRTC 13 for sm_90, fewer loads in flight), for a sum that
// one block in thousands runs.
__device__ NOT_INLINED double fixed_sum(const volatile double* partial, long long n)
{
    __shared__ double warp_sums[HIMENO_MAX_WARPS];
    const unsigned threads = blockDim.x * blockDim.y;
    const unsigned t = threadIdx.y * blockDim.x + threadIdx.x;
    const unsigned lane = t % HIMENO_WARP;
    for (unsigned x = t; x < HIMENO_REDUCE_THREADS; x += threads) {
        double v = 0.0;
        for (long long y = x; y < n; y += HIMENO_REDUCE_THREADS) {
            v += partial[y];
        }
        for (int off = HIMENO_WARP / 2; off > 0; off >>= 1) {
            v += __shfl_down_sync(0xffffffffu, v, off);
        }
        if (lane == 0) {
            warp_sums[x / HIMENO_WARP] = v;
        }
    }
    __syncthreads();
    double s = 0.0;
    if (t < HIMENO_WARP) {
        s = lane < HIMENO_REDUCE_THREADS / HIMENO_WARP ? warp_sums[lane] : 0.0;
        for (int off = HIMENO_WARP / 2; off > 0; off >>= 1) {
            s += __shfl_down_sync(0xffffffffu, s, off);
        }
    }
    return s;
}

// The parameters every sweep variant adds for the fused reduction: the
// first of all the sweep's partial sums (`partial` is this launch's
// first), how many there are over every launch of the sweep, the ticket
// counter the blocks draw from (0 between sweeps) and the slot gosa goes
// to.
#define SWEEP_GOSA_PARAMS                                             \
    const double* all, long long total, unsigned* __restrict__ ticket, \
        double* __restrict__ gosa

// Ends a sweep block: writes its sum of squared residuals `g` to
// partial[blockIdx.x], and the block that finishes last (of every launch
// of the sweep: they share `ticket`) sums all `total` partials in the
// fixed order of fixed_sum into *gosa and resets the ticket for the next
// sweep. The fence orders each block's partial before its ticket, so the
// last block sees every partial (the threadFenceReduction pattern of the
// CUDA samples); which block is last varies, the sum's order does not.
__device__ void finish_gosa(double g, double* partial, SWEEP_GOSA_PARAMS)
{
    __shared__ int last;
    const double s = block_sum(g);
    if (threadIdx.x == 0 && threadIdx.y == 0) {
        partial[blockIdx.x] = s;
        __threadfence();
        last = atomicAdd(ticket, 1u) == (unsigned)(total - 1);
    }
    __syncthreads();
    if (last) {
        __threadfence();
        const double sum = fixed_sum(all, total);
        if (threadIdx.x == 0 && threadIdx.y == 0) {
            *gosa = sum;
            *ticket = 0u;
        }
    }
}

// The parameters every sweep variant adds last for the faces it stores
// (store_faces): the device buffers of the low and high face normal to
// face_dim (null: this launch stores none) and the block's local extents
// along i and k (d1 is j's; d2, the row pitch, may exceed e2).
#define SWEEP_FACE_PARAMS \
    float* __restrict__ face_lo, float* __restrict__ face_hi, int face_dim, int e0, int e2

// Stores what the thread computed of the owned plane next to a face normal
// to face_dim (the first owned plane for face_lo, the last for face_hi)
// into that face's device buffer, in pack_face's order, and with each such
// point the ghosts of `out` beside it on the plane (the face's rim, which
// no sweep writes and the point nearest it stores): the buffer then holds
// what pack_face would gather from `out`, the same floats, and the halo's
// first dimension step launches no pack. Only the first step's faces can
// come from here: a later step's faces carry ghosts that the earlier steps
// receive after the sweep. Runs last (after finish_gosa, when nothing of
// the march is live) and recomputes the thread's point as sweep does, from
// special registers read afresh, so that no value of the march's is kept
// for it; it reads back the new p the thread itself stored. (Not inlined,
// the call's register saves took stack frames at --gpu-occupancy 4 and 5;
// inlined before finish_gosa, classic spilled at 5: NVRTC 13, sm_90.)
// The thread's and its block's indices and the block's shape, read from
// their special registers afresh (volatile: the compiler cannot reuse the
// values read before the march, which would keep them live across it).
// The emulator's host build reads its own.
#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
#define FRESH_SREG(fn, reg, host)                                 \
    __device__ __forceinline__ unsigned fn()                      \
    {                                                             \
        unsigned v;                                               \
        asm volatile("mov.u32 %0, %%" reg ";" : "=r"(v));          \
        return v;                                                 \
    }
#else
#define FRESH_SREG(fn, reg, host)                                 \
    __device__ __forceinline__ unsigned fn()                      \
    {                                                             \
        return host;                                              \
    }
#endif
FRESH_SREG(fresh_tid_x, "tid.x", threadIdx.x)
FRESH_SREG(fresh_tid_y, "tid.y", threadIdx.y)
FRESH_SREG(fresh_ntid_x, "ntid.x", blockDim.x)
FRESH_SREG(fresh_ntid_y, "ntid.y", blockDim.y)
FRESH_SREG(fresh_ctaid_x, "ctaid.x", blockIdx.x)
#undef FRESH_SREG

__device__ __forceinline__ void store_faces(
    const float* out, float* face_lo, float* face_hi, int face_dim, int e0, int e2,
    long long d1, long long d2, int i0, int j0, int k0, int ni, int nj, int nk, int planes,
    int nkb, int njb)
{
    const int b = fresh_ctaid_x();
    const int k = k0 + (b % nkb) * fresh_ntid_x() + fresh_tid_x();
    const int j = j0 + ((b / nkb) % njb) * fresh_ntid_y() + fresh_tid_y();
    const int ifirst = i0 + (b / (nkb * njb)) * planes;
    const int iend = min(ifirst + planes, i0 + ni);
    if (k >= k0 + nk || j >= j0 + nj) {
        return;
    }
    // The face's extent and the point's index across it, and its two
    // dimensions (u slower, v faster: pack_face's a and b).
    const int e1 = (int)d1;
    const int ext = face_dim == 0 ? e0 : face_dim == 1 ? e1 : e2;
    const int nu = face_dim == 0 ? e1 : e0;
    const int nv = face_dim == 2 ? e1 : e2;
    for (int i = ifirst; i < iend; ++i) {
        const int at = face_dim == 0 ? i : face_dim == 1 ? j : k;
        const int u = face_dim == 0 ? j : i;
        const int v = face_dim == 2 ? j : k;
        for (int side = 0; side < 2; ++side) {
            float* const face = side == 0 ? face_lo : face_hi;
            if (face == nullptr || at != (side == 0 ? 1 : ext - 2)) {
                continue;
            }
            for (int su = -1; su <= 1; ++su) {
                for (int sv = -1; sv <= 1; ++sv) {
                    // The point itself, or a ghost of the rim beside it.
                    const int fu = u + su, fv = v + sv;
                    if ((su != 0 && fu != 0 && fu != nu - 1) || (sv != 0 && fv != 0 && fv != nv - 1)) {
                        continue;
                    }
                    const long long x = face_dim == 0 ? i : fu;
                    const long long y = face_dim == 0 ? fu : face_dim == 1 ? j : fv;
                    const long long z = face_dim == 2 ? k : fv;
                    face[(long long)fu * nv + fv] = out[(x * d1 + y) * d2 + z];
                }
            }
        }
    }
}

// Ends a sweep kernel's thread after finish_gosa: stores the faces when
// the launch was handed any.
#define SWEEP_STORE_FACES                                                               \
    if (face_lo != nullptr || face_hi != nullptr) {                                     \
        store_faces(out, face_lo, face_hi, face_dim, e0, e2, d1, d2, i0, j0, k0, ni, nj, nk, \
                    planes, nkb, njb);                                                  \
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
#define SWEEP_PARAMS                                                            \
    const float* __restrict__ p, float* __restrict__ out,                       \
        const float* __restrict__ a0, const float* __restrict__ a1,             \
        const float* __restrict__ a2, const float* __restrict__ a3,             \
        const float* __restrict__ b0, const float* __restrict__ b1,             \
        const float* __restrict__ b2, const float* __restrict__ c0,             \
        const float* __restrict__ c1, const float* __restrict__ c2,             \
        const float* __restrict__ bnd, const float* __restrict__ wrk1,          \
        float omega, long long d1, long long d2, int i0, int j0, int k0, int ni, \
        int nj, int nk, int planes, int nkb, int njb, double* partial,          \
        SWEEP_GOSA_PARAMS, SWEEP_FACE_PARAMS

// SWEEP_PARAMS' names, in order: the kernels' arguments passed on whole.
#define SWEEP_ARGS                                                                  \
    p, out, a0, a1, a2, a3, b0, b1, b2, c0, c1, c2, bnd, wrk1, omega, d1, d2, i0, j0, \
        k0, ni, nj, nk, planes, nkb, njb, partial, all, total, ticket, gosa, face_lo, face_hi, face_dim, \
        e0, e2

// Ends a sweep body: with FACES (the kernel's `_faces` twin, which the
// host launches only when the launch stores faces) stores them; without,
// the kernel holds no code of it, so that its registers are those of the
// sweep alone (the store's code after the march changed the assembler's
// budget for the whole kernel: sweep 72 -> 56, sweep_pipelined 118 -> 66
// registers at occupancy auto, NVRTC 13, sm_90), which a single rank, or
// any step with no faces to store, keeps.
#define SWEEP_END(FACES)                          \
    finish_gosa(g, partial, all, total, ticket, gosa); \
    if constexpr (FACES) {                        \
        SWEEP_STORE_FACES;                        \
    }

template <bool FACES>
__device__ __forceinline__ void sweep_body(SWEEP_PARAMS)
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
    SWEEP_END(FACES);
}

extern "C" __global__ void SWEEP_BOUNDS sweep(SWEEP_PARAMS)
{
    sweep_body<false>(SWEEP_ARGS);
}

// The classic sweep storing the first step's faces (store_faces).
extern "C" __global__ void SWEEP_BOUNDS sweep_faces(SWEEP_PARAMS)
{
    sweep_body<true>(SWEEP_ARGS);
}

// The variants of the sweep (launch::SweepVariant, --gpu-sweep): the same
// parameters, the same arithmetic in the same order, so the same bits as
// `sweep` above; they differ in how many loads each thread keeps in flight
// and how many registers its addresses take.

// Everything one point's update reads besides the p values carried from
// the previous plane (pm = p[c - di], pc = p[c]).
struct Point {
    float a0, a1, a2, a3, b0, b1, b2, c0, c1, c2, bnd, wrk1;
    // p[c + di], p[c + dj], p[c + 1], p[c - dj], p[c - 1].
    float pi, pj, pk, mj, mk;
    // The cross terms of b0, b1, b2, in the order sweep reads them.
    float q0[4], q1[4], q2[4];
};

// Loads the Point at index c, each field's value read as AT(field, index).
#define LOAD_POINT(v, AT, c)                                                \
    do {                                                                  \
        (v).a0 = AT(a0, (c)); (v).a1 = AT(a1, (c)); (v).a2 = AT(a2, (c));       \
        (v).a3 = AT(a3, (c)); (v).b0 = AT(b0, (c)); (v).b1 = AT(b1, (c));       \
        (v).b2 = AT(b2, (c)); (v).c0 = AT(c0, (c)); (v).c1 = AT(c1, (c));       \
        (v).c2 = AT(c2, (c)); (v).bnd = AT(bnd, (c)); (v).wrk1 = AT(wrk1, (c)); \
        (v).pi = AT(p, (c) + di); (v).pj = AT(p, (c) + dj);                   \
        (v).pk = AT(p, (c) + 1); (v).mj = AT(p, (c) - dj);                    \
        (v).mk = AT(p, (c) - 1);                                            \
        (v).q0[0] = AT(p, (c) + di + dj); (v).q0[1] = AT(p, (c) + di - dj);   \
        (v).q0[2] = AT(p, (c) - di + dj); (v).q0[3] = AT(p, (c) - di - dj);   \
        (v).q1[0] = AT(p, (c) + dj + 1); (v).q1[1] = AT(p, (c) - dj + 1);     \
        (v).q1[2] = AT(p, (c) + dj - 1); (v).q1[3] = AT(p, (c) - dj - 1);     \
        (v).q2[0] = AT(p, (c) + di + 1); (v).q2[1] = AT(p, (c) - di + 1);     \
        (v).q2[2] = AT(p, (c) + di - 1); (v).q2[3] = AT(p, (c) - di - 1);     \
    } while (0)

// The update of one point, in sweep's order of operations: adds its
// squared residual to g and returns the new p.
__device__ __forceinline__ float update(const Point& v, float pm, float pc, float omega, double& g)
{
    const float s0 = v.a0 * v.pi
        + v.a1 * v.pj
        + v.a2 * v.pk
        + v.b0 * (v.q0[0] - v.q0[1] - v.q0[2] + v.q0[3])
        + v.b1 * (v.q1[0] - v.q1[1] - v.q1[2] + v.q1[3])
        + v.b2 * (v.q2[0] - v.q2[1] - v.q2[2] + v.q2[3])
        + v.c0 * pm
        + v.c1 * v.mj
        + v.c2 * v.mk
        + v.wrk1;
    const float ss = (s0 * v.a3 - pc) * v.bnd;
    const float sq = ss * ss;
    g += (double)sq;
    return pc + omega * ss;
}

// The thread's point and i-range, as in sweep; false when it has none.
#define SWEEP_THREAD                                          \
    const int b = blockIdx.x;                                 \
    const int kt = b % nkb;                                   \
    const int jt = (b / nkb) % njb;                           \
    const int it = b / (nkb * njb);                           \
    const int k = k0 + kt * blockDim.x + threadIdx.x;         \
    const int j = j0 + jt * blockDim.y + threadIdx.y;         \
    const int ifirst = i0 + it * planes;                      \
    const int iend = min(ifirst + planes, i0 + ni);           \
    const bool busy = k < k0 + nk && j < j0 + nj && ifirst < iend

// Marches the thread's i-range with the next plane's loads issued before
// the current plane is computed (software pipelining: twice the loads in
// flight per thread, for more registers). AT reads a field, STORE writes
// out; c, di and dj have the index type of the variant.
#define PIPELINED_MARCH(AT, STORE)                      \
    do {                                                \
        float pm = AT(p, c - di);                       \
        float pc = AT(p, c);                            \
        Point cur;                                      \
        LOAD_POINT(cur, AT, c);                         \
        for (int i = ifirst; i < iend; ++i, c += di) {  \
            Point nxt = cur;                            \
            if (i + 1 < iend) {                         \
                LOAD_POINT(nxt, AT, c + di);            \
            }                                           \
            STORE(c, update(cur, pm, pc, omega, g));    \
            pm = pc;                                    \
            pc = cur.pi;                                \
            cur = nxt;                                  \
        }                                               \
    } while (0)

// Marches the thread's i-range one plane at a time, as sweep does.
#define PLAIN_MARCH(AT, STORE)                          \
    do {                                                \
        float pm = AT(p, c - di);                       \
        float pc = AT(p, c);                            \
        for (int i = ifirst; i < iend; ++i, c += di) {  \
            Point cur;                                  \
            LOAD_POINT(cur, AT, c);                     \
            STORE(c, update(cur, pm, pc, omega, g));    \
            pm = pc;                                    \
            pc = cur.pi;                                \
        }                                               \
    } while (0)

// Fields through their own 64-bit pointers, indices 64-bit.
#define AT_PTR(f, x) (f)[x]
#define STORE_PTR(x, v) (out[x] = (v))

// Fields through one base (the lowest of the fourteen addresses, derived
// from `out` so that the compiler keeps global loads and stores) and a
// 32-bit offset each, indices 32-bit: half the address registers. The
// host checks that every field lies within 2^32 values of the base
// (launch::slab_fits) before it launches these variants. The unsigned
// sums wrap exactly as the offsets do, and __ldg reads through the
// read-only path that __restrict__ gives the other variants.
#define AT_SLAB(f, x) __ldg(base + (unsigned)(o_##f + (x)))
#define STORE_SLAB(x, v) (base[(unsigned)(o_out + (x))] = (v))

// The slab's base and each field's offset from it, in values.
#define SLAB_OFFSETS                                                              \
    unsigned long long lo = (unsigned long long)p;                                \
    const float* const fields[14] = {p, out, a0, a1, a2, a3, b0, b1, b2, c0, c1,  \
                                     c2, bnd, wrk1};                              \
    for (int f = 1; f < 14; ++f) {                                                \
        lo = min(lo, (unsigned long long)fields[f]);                              \
    }                                                                             \
    float* const base = out - ((unsigned long long)out - lo) / sizeof(float);     \
    const unsigned o_p = (unsigned)(p - base), o_out = (unsigned)(out - base);    \
    const unsigned o_a0 = (unsigned)(a0 - base), o_a1 = (unsigned)(a1 - base);    \
    const unsigned o_a2 = (unsigned)(a2 - base), o_a3 = (unsigned)(a3 - base);    \
    const unsigned o_b0 = (unsigned)(b0 - base), o_b1 = (unsigned)(b1 - base);    \
    const unsigned o_b2 = (unsigned)(b2 - base), o_c0 = (unsigned)(c0 - base);    \
    const unsigned o_c1 = (unsigned)(c1 - base), o_c2 = (unsigned)(c2 - base);    \
    const unsigned o_bnd = (unsigned)(bnd - base), o_wrk1 = (unsigned)(wrk1 - base)

// Pipelined loads, 64-bit pointers.
template <bool FACES>
__device__ __forceinline__ void pipelined_body(SWEEP_PARAMS)
{
    SWEEP_THREAD;
    double g = 0.0;
    if (busy) {
        const long long di = d1 * d2;
        const long long dj = d2;
        long long c = ((long long)ifirst * d1 + j) * d2 + k;
        PIPELINED_MARCH(AT_PTR, STORE_PTR);
    }
    SWEEP_END(FACES);
}

extern "C" __global__ void SWEEP_BOUNDS sweep_pipelined(SWEEP_PARAMS)
{
    pipelined_body<false>(SWEEP_ARGS);
}

extern "C" __global__ void SWEEP_BOUNDS sweep_pipelined_faces(SWEEP_PARAMS)
{
    pipelined_body<true>(SWEEP_ARGS);
}

// The two slab variants' one body: one base and 32-bit offsets, marching
// one plane at a time or, when PIPELINED, with the next plane's loads in
// flight. PIPELINED is a constant of each instance, so each kernel holds
// its own march only and keeps its own register budget (SWEEP_BOUNDS on
// the kernel; the body is inlined into it).
template <bool PIPELINED, bool FACES>
__device__ __forceinline__ void slab_body(SWEEP_PARAMS)
{
    SWEEP_THREAD;
    double g = 0.0;
    if (busy) {
        SLAB_OFFSETS;
        const unsigned di = (unsigned)(d1 * d2);
        const unsigned dj = (unsigned)d2;
        unsigned c = ((unsigned)ifirst * (unsigned)d1 + (unsigned)j) * (unsigned)d2 + (unsigned)k;
        if constexpr (PIPELINED) {
            PIPELINED_MARCH(AT_SLAB, STORE_SLAB);
        } else {
            PLAIN_MARCH(AT_SLAB, STORE_SLAB);
        }
    }
    SWEEP_END(FACES);
}

// One plane at a time, one base and 32-bit offsets.
extern "C" __global__ void SWEEP_BOUNDS sweep_slab(SWEEP_PARAMS)
{
    slab_body<false, false>(SWEEP_ARGS);
}

extern "C" __global__ void SWEEP_BOUNDS sweep_slab_faces(SWEEP_PARAMS)
{
    slab_body<false, true>(SWEEP_ARGS);
}

// Pipelined loads, one base and 32-bit offsets.
extern "C" __global__ void SWEEP_BOUNDS sweep_pipelined_slab(SWEEP_PARAMS)
{
    slab_body<true, false>(SWEEP_ARGS);
}

extern "C" __global__ void SWEEP_BOUNDS sweep_pipelined_slab_faces(SWEEP_PARAMS)
{
    slab_body<true, true>(SWEEP_ARGS);
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

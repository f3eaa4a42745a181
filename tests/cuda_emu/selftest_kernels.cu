// Kernels that exercise the emulator itself (scripts/cuda-emu.sh selftest):
// some misbehave on purpose, as a kernel under development would. They are
// compiled into the emulator's host build beside kernels.cu and reached
// only through the hand-written PTX of selftest.cpp.

// Thread 5 leaves before the barrier the others wait at.
extern "C" __global__ void emu_st_barrier_skip(int *out)
{
    if (threadIdx.x == 5) {
        return;
    }
    __syncthreads();
    out[threadIdx.x] = 1;
}

// One thread writes a page past the end of its allocation of n floats.
extern "C" __global__ void emu_st_oob(float *p, long long n)
{
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        p[n + 4096] = 1.0f;
    }
}

// Each warp sums its threads' flat indices with a shuffle tree; lane 0
// writes the sum.
extern "C" __global__ void emu_st_shuffle(double *out)
{
    const unsigned t = threadIdx.y * blockDim.x + threadIdx.x;
    double v = t;
    for (int off = 16; off > 0; off >>= 1) {
        v += __shfl_down_sync(0xffffffffu, v, off);
    }
    if (t % 32 == 0) {
        out[blockIdx.x * (blockDim.x * blockDim.y / 32) + t / 32] = v;
    }
}

// Per-block shared memory behind a barrier: thread t reads what thread
// n-1-t wrote.
extern "C" __global__ void emu_st_shared(int *out)
{
    __shared__ int s[1024];
    const unsigned n = blockDim.x;
    s[threadIdx.x] = (int)(blockIdx.x * n + threadIdx.x);
    __syncthreads();
    out[blockIdx.x * n + threadIdx.x] = s[n - 1 - threadIdx.x];
}

// The coordinates every thread sees, four per thread.
extern "C" __global__ void emu_st_coords(unsigned *out)
{
    const unsigned threads = blockDim.x * blockDim.y * blockDim.z;
    const unsigned b = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
    const unsigned t = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
    unsigned *o = out + 4 * (b * threads + t);
    o[0] = threadIdx.x + 100 * threadIdx.y + 10000 * threadIdx.z;
    o[1] = blockIdx.x + 100 * blockIdx.y + 10000 * blockIdx.z;
    o[2] = blockDim.x + 100 * blockDim.y + 10000 * blockDim.z;
    o[3] = gridDim.x + 100 * gridDim.y + 10000 * gridDim.z;
}

// Arguments of three widths, written back.
extern "C" __global__ void emu_st_widths(long long a, int b, float c, double *out)
{
    out[0] = (double)a;
    out[1] = (double)b;
    out[2] = (double)c;
}

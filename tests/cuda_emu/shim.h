// Force-included (g++ -include shim.h) before src/backend/gpu/kernels.cu when
// the emulated CUDA driver builds the real kernels for the host CPU. Each
// CUDA thread of a block runs as a fiber on one host thread (fiber.cpp):
// threadIdx and friends read the running fiber's coordinates, __shared__
// variables are per host thread and so per block, __syncthreads is a
// barrier of the block's fibers that reports a thread that never arrives,
// and __shfl_down_sync exchanges values among the 32 lanes of a warp,
// which run in step (every lane writes, the warp meets, every lane reads).
// Built with -ffp-contract=off, as NVRTC compiles with --fmad=false.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace emu {

struct Coord {
    unsigned x, y, z;
};

// The running emulated thread and its launch.
struct ThreadState {
    Coord idx;
    unsigned flat, lane, warp;
};
struct BlockState {
    Coord idx;
};
struct LaunchState {
    Coord grid, block;
};
extern thread_local ThreadState *tls_thread;
extern thread_local BlockState tls_block;
extern thread_local LaunchState tls_launch;

// The barrier of the running block.
void syncthreads();
// Warp shuffle of 8 bytes: lane l gets lane l + delta's value (its own
// when that lane is past `width`).
uint64_t shfl_down_bits(unsigned mask, uint64_t bits, unsigned delta, int width);

}  // namespace emu

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static thread_local

#define threadIdx (emu::tls_thread->idx)
#define blockIdx (emu::tls_block.idx)
#define blockDim (emu::tls_launch.block)
#define gridDim (emu::tls_launch.grid)

inline void __syncthreads() { emu::syncthreads(); }

template <class T>
inline T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
    static_assert(sizeof(T) <= 8, "a shuffle moves at most 8 bytes per lane");
    uint64_t bits = 0;
    std::memcpy(&bits, &v, sizeof v);
    bits = emu::shfl_down_bits(mask, bits, delta, width);
    std::memcpy(&v, &bits, sizeof v);
    return v;
}

using std::max;
using std::min;

// The fused gosa reduction's ticket (src/backend/gpu/kernels.cu,
// finish_gosa): a real atomic and a full fence, since launches on
// different streams may run on different worker threads at once.
inline unsigned atomicAdd(unsigned *p, unsigned v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
// A read through the read-only data path: a plain read on the host.
template <class T>
inline T __ldg(const T *p) {
    return *p;
}

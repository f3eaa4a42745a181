// The emulator's self-test (scripts/cuda-emu.sh selftest): a driver-API
// program that checks what the emulated device must punish or provide,
// with the test kernels of selftest_kernels.cu declared by hand-written
// PTX. Prints one line per check and "selftest: all checks passed", or the
// failed checks and exits 1.
#include "api.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

extern "C" {
CUresult cuInit(unsigned);
CUresult cuDeviceGet(CUdevice *, int);
CUresult cuDevicePrimaryCtxRetain(CUcontext *, CUdevice);
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice);
CUresult cuCtxSetCurrent(CUcontext);
CUresult cuCtxSynchronize(void);
CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);
CUresult cuMemFree_v2(CUdeviceptr);
CUresult cuMemHostAlloc(void **, size_t, unsigned);
CUresult cuMemFreeHost(void *);
CUresult cuMemsetD8Async(CUdeviceptr, unsigned char, size_t, CUstream);
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr, const void *, size_t, CUstream);
CUresult cuMemcpyDtoHAsync_v2(void *, CUdeviceptr, size_t, CUstream);
CUresult cuStreamCreate(CUstream *, unsigned);
CUresult cuStreamSynchronize(CUstream);
CUresult cuStreamWaitEvent(CUstream, CUevent, unsigned);
CUresult cuEventCreate(CUevent *, unsigned);
CUresult cuEventRecord(CUevent, CUstream);
CUresult cuEventElapsedTime(float *, CUevent, CUevent);
CUresult cuModuleLoadData(CUmodule *, const void *);
CUresult cuModuleGetFunction(CUfunction *, CUmodule, const char *);
CUresult cuLaunchKernel(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                        CUstream, void **, void **);
const char *himeno_emu_describe(void);
CUresult cuDeviceGetCount(int *);
CUresult cuDeviceCanAccessPeer(int *, CUdevice, CUdevice);
CUresult cuCtxEnablePeerAccess(CUcontext, unsigned);
CUresult cuMemcpyPeerAsync(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t, CUstream);
void himeno_emu_host_counts(uint64_t *, uint64_t *);
}

namespace {

int g_failed = 0;

void check(bool ok, const std::string &what) {
    std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
    if (!ok) ++g_failed;
}

const char *PTX = R"(
.version 8.0
.target sm_80
.address_size 64
.visible .entry emu_st_barrier_skip(.param .u64 emu_st_barrier_skip_param_0) .maxntid 1024, 1, 1 { ret; }
.visible .entry emu_st_oob(.param .u64 emu_st_oob_param_0, .param .u64 emu_st_oob_param_1) { ret; }
.visible .entry emu_st_shuffle(.param .u64 emu_st_shuffle_param_0) { ret; }
.visible .entry emu_st_shared(.param .u64 emu_st_shared_param_0) .maxntid 256, 1, 1 { ret; }
.visible .entry emu_st_coords(.param .u64 emu_st_coords_param_0) { ret; }
.visible .entry emu_st_widths(.param .u64 a, .param .u32 b, .param .f32 c, .param .u64 out) { ret; }
)";

// The same kernel declared with another parameter width than the host
// build's (int for its long long).
const char *PTX_WRONG = R"(
.version 8.0
.target sm_80
.address_size 64
.visible .entry emu_st_widths(.param .u32 a, .param .u32 b, .param .f32 c, .param .u64 out) { ret; }
)";

const uint64_t ARGS_END = 0x48494D454E4F2E2Eull;
const uint64_t CANARY = 0xA5A5A5A500000000ull;

// Slots of himeno's launch protocol for `values`, terminated.
struct Args {
    std::vector<uint64_t> slots;
    std::vector<void *> ptrs;
    explicit Args(std::vector<uint64_t> v) : slots(std::move(v)) {
        for (auto &s : slots) ptrs.push_back(&s);
        ptrs.push_back(const_cast<uint64_t *>(&ARGS_END));
    }
    void **get() { return ptrs.data(); }
};

uint64_t i32(int v) { return CANARY | static_cast<uint32_t>(v); }
uint64_t f32(float v) {
    uint32_t b;
    std::memcpy(&b, &v, 4);
    return CANARY | b;
}

struct Session {
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CUstream st;
    CUfunction f(const char *name) {
        CUfunction fn = nullptr;
        cuModuleGetFunction(&fn, mod, name);
        return fn;
    }
    Session() {
        cuDeviceGet(&dev, 0);
        cuDevicePrimaryCtxRetain(&ctx, dev);
        cuCtxSetCurrent(ctx);
        cuModuleLoadData(&mod, PTX);
        cuStreamCreate(&st, 1);
    }
    // Releases the primary context (the last reference destroys it, and
    // a sticky error with it).
    ~Session() { cuDevicePrimaryCtxRelease_v2(dev); }
};

}  // namespace

int main() {
    check(cuInit(0) == 0, std::string("cuInit: ") + himeno_emu_describe());
    {
        Session s;
        CUdeviceptr d;
        cuMemAlloc_v2(&d, 64 * 8);
        Args a({i32(7), i32(-3), f32(2.5f), d});
        // A 4-byte value where the kernel declares long long.
        check(cuLaunchKernel(s.f("emu_st_widths"), 1, 1, 1, 1, 1, 1, 0, s.st, a.get(), nullptr) == emu::INVALID_VALUE,
              "an int where the kernel declares long long is refused");
        Args b({7, i32(-3), f32(2.5f), d});
        check(cuLaunchKernel(s.f("emu_st_widths"), 1, 1, 1, 1, 1, 1, 0, s.st, b.get(), nullptr) == 0,
              "arguments of three widths are accepted");
        double got[3];
        cuMemcpyDtoHAsync_v2(got, d, sizeof got, s.st);
        check(got[0] == 7 && got[1] == -3 && got[2] == 2.5, "they arrive as declared");
        Args c({7, 5, f32(2.5f), d});
        check(cuLaunchKernel(s.f("emu_st_widths"), 1, 1, 1, 1, 1, 1, 0, s.st, c.get(), nullptr) == emu::INVALID_VALUE,
              "an 8-byte value where the kernel declares int is refused");
        Args few({7, i32(-3), f32(2.5f)});
        check(cuLaunchKernel(s.f("emu_st_widths"), 1, 1, 1, 1, 1, 1, 0, s.st, few.get(), nullptr) == emu::INVALID_VALUE,
              "a missing argument is refused");
        Args many({7, i32(-3), f32(2.5f), d, d});
        check(cuLaunchKernel(s.f("emu_st_widths"), 1, 1, 1, 1, 1, 1, 0, s.st, many.get(), nullptr) == emu::INVALID_VALUE,
              "an extra argument is refused");
        Args wild({7, i32(-3), f32(2.5f), d + (1 << 20)});
        check(cuLaunchKernel(s.f("emu_st_widths"), 1, 1, 1, 1, 1, 1, 0, s.st, wild.get(), nullptr) == emu::INVALID_VALUE,
              "a pointer outside every allocation is refused");
        CUfunction none = nullptr;
        check(cuModuleGetFunction(&none, s.mod, "sweep") == emu::NOT_FOUND, "a kernel not in the image is not found");
        CUmodule wrong;
        cuModuleLoadData(&wrong, PTX_WRONG);
        check(cuModuleGetFunction(&none, wrong, "emu_st_widths") == emu::INVALID_IMAGE,
              "an image whose declaration differs from the host build is refused");
        Args one({d});
        check(cuLaunchKernel(s.f("emu_st_shared"), 1, 1, 1, 512, 1, 1, 0, s.st, one.get(), nullptr) == emu::INVALID_VALUE,
              "more threads than __launch_bounds__ allow are refused");
        check(cuLaunchKernel(s.f("emu_st_coords"), 1, 1, 1, 2048, 1, 1, 0, s.st, one.get(), nullptr) == emu::INVALID_VALUE,
              "more than 1024 threads per block are refused");
        check(cuLaunchKernel(s.f("emu_st_coords"), 1, 70000, 1, 1, 1, 1, 0, s.st, one.get(), nullptr) == emu::INVALID_VALUE,
              "a grid taller than 65535 is refused");
        check(cuStreamSynchronize(s.st) == 0, "refused launches leave no sticky error");
        cuMemFree_v2(d);
    }
    {
        Session s;
        // Coordinates of a 3-D launch.
        const unsigned gx = 3, gy = 2, gz = 2, bx = 8, by = 4, bz = 2;
        size_t n = 4ull * gx * gy * gz * bx * by * bz;
        CUdeviceptr d;
        cuMemAlloc_v2(&d, n * 4);
        Args a({d});
        cuLaunchKernel(s.f("emu_st_coords"), gx, gy, gz, bx, by, bz, 0, s.st, a.get(), nullptr);
        std::vector<unsigned> o(n);
        cuMemcpyDtoHAsync_v2(o.data(), d, n * 4, s.st);
        bool ok = true;
        for (unsigned b = 0; b < gx * gy * gz; ++b) {
            for (unsigned t = 0; t < bx * by * bz; ++t) {
                const unsigned *q = &o[4 * (b * bx * by * bz + t)];
                unsigned tx = t % bx, ty = t / bx % by, tz = t / (bx * by);
                unsigned bxi = b % gx, byi = b / gx % gy, bzi = b / (gx * gy);
                ok = ok && q[0] == tx + 100 * ty + 10000 * tz && q[1] == bxi + 100 * byi + 10000 * bzi &&
                     q[2] == bx + 100 * by + 10000 * bz && q[3] == gx + 100 * gy + 10000 * gz;
            }
        }
        check(ok, "threadIdx, blockIdx, blockDim and gridDim of a 3-D launch");
        cuMemFree_v2(d);
        // Warp shuffles over 8 warps of 2 blocks.
        CUdeviceptr w;
        cuMemAlloc_v2(&w, 16 * 8);
        Args sa({w});
        cuLaunchKernel(s.f("emu_st_shuffle"), 2, 1, 1, 64, 4, 1, 0, s.st, sa.get(), nullptr);
        double sums[16];
        cuMemcpyDtoHAsync_v2(sums, w, sizeof sums, s.st);
        ok = true;
        for (int i = 0; i < 16; ++i) {
            int first = (i % 8) * 32;
            ok = ok && sums[i] == 32.0 * first + 496.0;
        }
        check(ok, "__shfl_down_sync trees sum each warp");
        // Shared memory is per block, and the barrier orders it.
        CUdeviceptr sh;
        cuMemAlloc_v2(&sh, 3 * 256 * 4);
        Args ha({sh});
        cuLaunchKernel(s.f("emu_st_shared"), 3, 1, 1, 256, 1, 1, 0, s.st, ha.get(), nullptr);
        std::vector<int> v(3 * 256);
        cuMemcpyDtoHAsync_v2(v.data(), sh, v.size() * 4, s.st);
        ok = true;
        for (int b = 0; b < 3; ++b) {
            for (int t = 0; t < 256; ++t) ok = ok && v[b * 256 + t] == b * 256 + 255 - t;
        }
        check(ok, "__shared__ memory behind __syncthreads, per block");
        // Fresh device memory is poisoned (NaN).
        CUdeviceptr fresh;
        cuMemAlloc_v2(&fresh, 64);
        float f[16];
        cuMemcpyDtoHAsync_v2(f, fresh, sizeof f, s.st);
        check(std::isnan(f[0]) && std::isnan(f[15]), "fresh device memory reads as NaN");
        // Pinned copies touch host memory when they run, not when queued.
        float *pin;
        cuMemHostAlloc(reinterpret_cast<void **>(&pin), 64, 0);
        for (int i = 0; i < 16; ++i) pin[i] = 1.0f;
        CUevent e0, e1;
        cuEventCreate(&e0, 0);
        cuEventCreate(&e1, 0);
        cuEventRecord(e0, s.st);
        cuMemcpyHtoDAsync_v2(fresh, pin, 64, s.st);
        cuEventRecord(e1, s.st);
        for (int i = 0; i < 16; ++i) pin[i] = 2.0f;  // before the copy runs
        float ms = 0;
        bool late = cuEventElapsedTime(&ms, e0, e1) == emu::NOT_READY;
        cuStreamSynchronize(s.st);
        cuMemcpyDtoHAsync_v2(f, fresh, sizeof f, s.st);
        check(f[0] == 2.0f, "a pinned host-to-device copy reads host memory when it runs");
        check(late && cuEventElapsedTime(&ms, e0, e1) == 0 && ms >= 0,
              "events time nothing before the work ran, and their interval after");
        cuMemsetD8Async(fresh, 0, 64, s.st);
        cuMemcpyDtoHAsync_v2(pin, fresh, 64, s.st);
        check(std::isnan(pin[0]), "the pinned destination of a queued copy is poisoned until it runs");
        cuStreamSynchronize(s.st);
        check(pin[0] == 0.0f, "and holds the data after the stream synchronises");
        // Pageable device-to-host copies are complete on return.
        cuMemsetD8Async(fresh, 0, 64, s.st);
        float page[16] = {5};
        cuMemcpyDtoHAsync_v2(page, fresh, sizeof page, s.st);
        check(page[0] == 0.0f, "a pageable device-to-host copy is complete when it returns");
        // Stream order across streams through an event.
        CUstream other;
        cuStreamCreate(&other, 1);
        for (int i = 0; i < 16; ++i) pin[i] = 3.0f;
        cuMemcpyHtoDAsync_v2(fresh, pin, 64, s.st);
        CUevent done;
        cuEventCreate(&done, 0);
        cuEventRecord(done, s.st);
        cuStreamWaitEvent(other, done, 0);
        float back[16];
        cuMemcpyDtoHAsync_v2(back, fresh, 64, other);
        check(back[0] == 3.0f, "a stream that waits for an event sees the work before it");
        // A context is current per OS thread.
        CUresult there = 0;
        std::thread([&] {
            CUdeviceptr x;
            there = cuMemAlloc_v2(&x, 64);
        }).join();
        check(there == emu::INVALID_CONTEXT, "a thread without a current context cannot allocate");
        cuMemFreeHost(pin);
    }
    {
        Session s;
        CUdeviceptr d;
        cuMemAlloc_v2(&d, 1024 * 4);
        Args a({d});
        cuLaunchKernel(s.f("emu_st_barrier_skip"), 1, 1, 1, 64, 1, 1, 0, s.st, a.get(), nullptr);
        check(cuStreamSynchronize(s.st) == emu::LAUNCH_FAILED, "a thread that never reaches __syncthreads fails the launch");
        CUdeviceptr x;
        check(cuMemAlloc_v2(&x, 64) == emu::LAUNCH_FAILED, "and the error is sticky");
    }
    {
        // The last release destroyed the context; a new one starts clean.
        Session s;
        CUdeviceptr d;
        check(cuMemAlloc_v2(&d, 1024 * 4) == 0, "a new primary context after the last release starts clean");
        Args a({d, 1024});
        cuLaunchKernel(s.f("emu_st_oob"), 1, 1, 1, 32, 1, 1, 0, s.st, a.get(), nullptr);
        check(cuStreamSynchronize(s.st) == emu::ILLEGAL_ADDRESS, "an access past an allocation is an illegal address");
        check(cuCtxSynchronize() == emu::ILLEGAL_ADDRESS, "and the error is sticky");
    }
    {
        // Reference counting: two retains, one release, still usable.
        Session s;
        CUcontext again;
        cuDevicePrimaryCtxRetain(&again, s.dev);
        cuDevicePrimaryCtxRelease_v2(s.dev);
        CUdeviceptr d;
        check(again == s.ctx && cuMemAlloc_v2(&d, 64) == 0, "the primary context is reference-counted");
    }
    int devices = 0;
    cuDeviceGetCount(&devices);
    if (devices >= 2) {
        // Peer copies: a stream of device 1 that waits for an event of
        // device 0 sees device 0's work before it, in a copy between them.
        CUdevice d0, d1;
        cuDeviceGet(&d0, 0);
        cuDeviceGet(&d1, 1);
        CUcontext c0, c1;
        cuDevicePrimaryCtxRetain(&c0, d0);
        cuDevicePrimaryCtxRetain(&c1, d1);
        int can = 0;
        check(cuDeviceCanAccessPeer(&can, d0, d1) == 0 && can == 1, "two devices can access each other");
        cuCtxSetCurrent(c0);
        CUstream s0;
        cuStreamCreate(&s0, 1);
        CUdeviceptr a;
        cuMemAlloc_v2(&a, 64);
        void *pin;
        cuMemHostAlloc(&pin, 64, 0);
        for (int i = 0; i < 16; ++i) static_cast<float *>(pin)[i] = 7.0f;
        cuMemcpyHtoDAsync_v2(a, pin, 64, s0);
        CUevent e0;
        cuEventCreate(&e0, 0);
        cuEventRecord(e0, s0);
        cuCtxSetCurrent(c1);
        check(cuCtxEnablePeerAccess(c0, 0) == 0 &&
                  cuCtxEnablePeerAccess(c0, 0) == emu::PEER_ACCESS_ALREADY_ENABLED,
              "peer access is granted once");
        CUstream s1;
        cuStreamCreate(&s1, 1);
        CUdeviceptr b;
        cuMemAlloc_v2(&b, 64);
        check(cuStreamWaitEvent(s1, e0, 0) == 0, "a stream may wait for an event of another device");
        cuMemcpyPeerAsync(b, c1, a, c0, 64, s1);
        float back[16] = {0};
        // Pageable: returns complete, running device 0's work on the way.
        cuMemcpyDtoHAsync_v2(back, b, 64, s1);
        check(back[0] == 7.0f && back[15] == 7.0f,
              "a peer copy after a wait for the other device's event sees its work");
        // Counts: a synchronisation with nothing to wait for is not a
        // host wait; one with a copy queued is, and the copy's bytes count.
        uint64_t w0, b0, w1, b1, w2, b2;
        himeno_emu_host_counts(&w0, &b0);
        cuStreamSynchronize(s1);
        himeno_emu_host_counts(&w1, &b1);
        cuMemcpyHtoDAsync_v2(b, pin, 64, s1);
        cuStreamSynchronize(s1);
        himeno_emu_host_counts(&w2, &b2);
        check(w1 == w0 && b1 == b0 && w2 == w1 + 1 && b2 == b1 + 64,
              "host waits count synchronisations with work to wait for, and bytes the copies");
        {
            // Devices that wait on each other while another thread runs
            // the work they wait for: stream y of device 0 waits for
            // device 1's record, which waits for device 0's record behind
            // a long kernel that a second thread is running. A thread that
            // drove each device in turn until the other's record had run,
            // one inside the other, recursed until its stack overflowed.
            cuCtxSetCurrent(c0);
            CUmodule mod;
            cuModuleLoadData(&mod, PTX);
            CUfunction slow = nullptr;
            cuModuleGetFunction(&slow, mod, "emu_st_shared");
            const unsigned blocks = 8000, threads = 256;
            CUdeviceptr out;
            cuMemAlloc_v2(&out, size_t{blocks} * threads * 4);
            CUstream x, y;
            cuStreamCreate(&x, 1);
            cuStreamCreate(&y, 1);
            Args args({out});
            cuLaunchKernel(slow, blocks, 1, 1, threads, 1, 1, 0, x, args.get(), nullptr);
            CUevent after_slow, on_1;
            cuEventCreate(&after_slow, 0);
            cuEventRecord(after_slow, x);
            cuCtxSetCurrent(c1);
            CUstream z;
            cuStreamCreate(&z, 1);
            cuStreamWaitEvent(z, after_slow, 0);
            cuEventCreate(&on_1, 0);
            cuEventRecord(on_1, z);
            cuCtxSetCurrent(c0);
            cuStreamWaitEvent(y, on_1, 0);
            std::thread runner([&] {
                cuCtxSetCurrent(c0);
                cuStreamSynchronize(x);
            });
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            CUresult waited = cuStreamSynchronize(y);
            runner.join();
            int last[1] = {0};
            cuMemcpyDtoHAsync_v2(last, out + (size_t{blocks} * threads - 1) * 4, 4, y);
            check(waited == 0 && last[0] == static_cast<int>((blocks - 1) * threads),
                  "a wait through another device for work a second thread runs ends when that work has run");
        }
        {
            // A wait for another device's record while a second thread
            // runs that record: this thread waits on device 1 for a record
            // that the other thread queues on device 0 and synchronises,
            // round after round. A record marked done between the
            // scheduler's look for ready work and its look for what blocks
            // the rest once made device 1 look stuck ("can never run").
            // Idle streams on device 1 lengthen that look, as a rank's
            // several streams do.
            constexpr int rounds = 20000;
            cuCtxSetCurrent(c1);
            CUstream w;
            cuStreamCreate(&w, 1);
            std::vector<CUstream> idle(256);
            for (CUstream &x : idle) cuStreamCreate(&x, 1);
            cuCtxSetCurrent(c0);
            CUstream r;
            cuStreamCreate(&r, 1);
            CUevent e;
            cuEventCreate(&e, 0);
            CUdeviceptr scratch;
            cuMemAlloc_v2(&scratch, 1 << 21);
            std::atomic<int> recorded{0}, waited{0};
            std::thread recorder([&] {
                cuCtxSetCurrent(c0);
                for (int i = 1; i <= rounds; ++i) {
                    // A memset of seeded length (up to 1 MiB) first: the
                    // record runs while the other thread looks, each round
                    // at another moment of its look.
                    cuMemsetD8Async(scratch, 0, 4096 + (i * 2654435761u) % (1 << 20), r);
                    cuEventRecord(e, r);
                    recorded.store(i);
                    cuStreamSynchronize(r);
                    while (waited.load() < i) std::this_thread::yield();
                }
            });
            cuCtxSetCurrent(c1);
            int failed = 0;
            for (int i = 1; i <= rounds; ++i) {
                while (recorded.load() < i) std::this_thread::yield();
                cuStreamWaitEvent(w, e, 0);
                if (cuStreamSynchronize(w) != 0) ++failed;
                waited.store(i);
            }
            recorder.join();
            check(failed == 0, "a wait for a record that another thread runs meanwhile never looks stuck (" +
                                   std::to_string(failed) + " of " + std::to_string(rounds) + " rounds failed)");
        }
        cuCtxSetCurrent(c0);
        cuMemFreeHost(pin);
        cuDevicePrimaryCtxRelease_v2(d1);
        cuDevicePrimaryCtxRelease_v2(d0);
    } else {
        check(false, "the peer checks need HIMENO_EMU_DEVICES=2 or more");
    }
    if (g_failed) {
        std::printf("selftest: %d check(s) failed\n", g_failed);
        return 1;
    }
    std::printf("selftest: all checks passed\n");
    return 0;
}

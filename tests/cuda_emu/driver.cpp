// The exported driver entry points: every name himeno's GPU path reaches
// through cudarc (which resolves them lazily by name and panics on a
// missing one), with the semantics CUDA documents that matter to it:
// reference-counted primary contexts current per OS thread, asynchronous
// streams and events, pinned versus pageable copies, sticky errors after a
// fault, launch limits from the loaded image, and the fault switches.
#include "emu.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#define EXPORT extern "C" __attribute__((visibility("default")))

using namespace emu;

namespace {

std::atomic<bool> g_init{false};
std::atomic<long> g_launches{0};

// Kernel launches per kernel name in this process, for
// HIMENO_EMU_LAUNCH_LOG: written at exit as one line appended to that file
// ("launches NAME=COUNT ...", in name order; the processes of an mpirun
// append to the same file), so that a test counts which kernels ran.
std::mutex g_counts_mu;

std::map<std::string, unsigned long long> &launch_counts() {
    static auto &m = *new std::map<std::string, unsigned long long>();
    return m;
}

void write_launch_log() {
    std::string line = "launches";
    {
        std::lock_guard<std::mutex> g(g_counts_mu);
        for (const auto &[name, n] : launch_counts()) line += " " + name + "=" + std::to_string(n);
    }
    line += "\n";
    const std::string &path = config().launch_log;
    int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    // One write of one short line: appends from several processes do not
    // interleave within it.
    if (fd < 0 || ::write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
        say("cannot append to HIMENO_EMU_LAUNCH_LOG=%s", path.c_str());
    }
    if (fd >= 0) ::close(fd);
}

// Counts a launch of kernel `name` when HIMENO_EMU_LAUNCH_LOG is set.
void count_launch(const char *name) {
    if (config().launch_log.empty()) return;
    static std::once_flag once;
    std::call_once(once, [] { std::atexit(write_launch_log); });
    std::lock_guard<std::mutex> g(g_counts_mu);
    ++launch_counts()[name];
}

std::vector<Device *> &devices() {
    static auto &d = *new std::vector<Device *>();
    return d;
}

// The device of a CUdevice handle (its visible ordinal).
Device *dev_of(CUdevice d) {
    if (d < 0 || static_cast<size_t>(d) >= devices().size()) return nullptr;
    return devices()[static_cast<size_t>(d)];
}

#define NEED_INIT() \
    do { \
        if (!g_init.load()) return NOT_INITIALIZED; \
    } while (0)

#define NEED_CTX(ctx) \
    Context *ctx = nullptr; \
    do { \
        NEED_INIT(); \
        CUresult r_ = usable(&ctx); \
        if (r_ != OK) return r_; \
    } while (0)

const char *error_name(CUresult e) {
    switch (e) {
        case OK: return "CUDA_SUCCESS";
        case INVALID_VALUE: return "CUDA_ERROR_INVALID_VALUE";
        case OUT_OF_MEMORY: return "CUDA_ERROR_OUT_OF_MEMORY";
        case NOT_INITIALIZED: return "CUDA_ERROR_NOT_INITIALIZED";
        case DEVICE_UNAVAILABLE: return "CUDA_ERROR_DEVICE_UNAVAILABLE";
        case NO_DEVICE: return "CUDA_ERROR_NO_DEVICE";
        case INVALID_DEVICE: return "CUDA_ERROR_INVALID_DEVICE";
        case INVALID_IMAGE: return "CUDA_ERROR_INVALID_IMAGE";
        case INVALID_CONTEXT: return "CUDA_ERROR_INVALID_CONTEXT";
        case NO_BINARY_FOR_GPU: return "CUDA_ERROR_NO_BINARY_FOR_GPU";
        case INVALID_PTX: return "CUDA_ERROR_INVALID_PTX";
        case UNSUPPORTED_PTX_VERSION: return "CUDA_ERROR_UNSUPPORTED_PTX_VERSION";
        case INVALID_HANDLE: return "CUDA_ERROR_INVALID_HANDLE";
        case NOT_FOUND: return "CUDA_ERROR_NOT_FOUND";
        case NOT_READY: return "CUDA_ERROR_NOT_READY";
        case PEER_ACCESS_ALREADY_ENABLED: return "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED";
        case ILLEGAL_ADDRESS: return "CUDA_ERROR_ILLEGAL_ADDRESS";
        case LAUNCH_OUT_OF_RESOURCES: return "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES";
        case LAUNCH_FAILED: return "CUDA_ERROR_LAUNCH_FAILED";
        case NOT_SUPPORTED: return "CUDA_ERROR_NOT_SUPPORTED";
        default: return nullptr;
    }
}

const char *error_string(CUresult e) {
    switch (e) {
        case OK: return "no error";
        case INVALID_VALUE: return "invalid argument";
        case OUT_OF_MEMORY: return "out of memory";
        case NOT_INITIALIZED: return "initialization error";
        case DEVICE_UNAVAILABLE: return "CUDA-capable device(s) is/are busy or unavailable";
        case NO_DEVICE: return "no CUDA-capable device is detected";
        case INVALID_DEVICE: return "invalid device ordinal";
        case INVALID_IMAGE: return "device kernel image is invalid";
        case INVALID_CONTEXT: return "invalid device context";
        case NO_BINARY_FOR_GPU: return "no kernel image is available for execution on the device";
        case INVALID_PTX: return "a PTX JIT compilation failed";
        case UNSUPPORTED_PTX_VERSION: return "the provided PTX was compiled with an unsupported toolchain.";
        case INVALID_HANDLE: return "invalid resource handle";
        case NOT_FOUND: return "named symbol not found";
        case NOT_READY: return "device not ready";
        case PEER_ACCESS_ALREADY_ENABLED: return "peer access is already enabled";
        case ILLEGAL_ADDRESS: return "an illegal memory access was encountered";
        case LAUNCH_OUT_OF_RESOURCES: return "too many resources requested for launch";
        case LAUNCH_FAILED: return "unspecified launch failure";
        case NOT_SUPPORTED: return "operation not supported";
        default: return nullptr;
    }
}

// The newest PTX ISA version a driver of CUDA version v loads.
int ptx_limit(int v) {
    if (v >= 13000) return 90;
    if (v >= 12090) return 88;
    if (v >= 12080) return 87;
    if (v >= 12060) return 85;
    if (v >= 12040) return 84;
    if (v >= 12000) return 80;
    return 78;
}

std::string host_name() {
    char h[256] = {0};
    gethostname(h, sizeof h - 1);
    return h;
}

void make_devices() {
    const Config &c = config();
    std::string host = host_name();
    for (int phys : c.visible) {
        auto *d = new Device();
        d->index = phys;
        uint64_t h = mix(0x68696d656e6f00ull ^ static_cast<uint64_t>(phys));
        for (char ch : host) h = mix(h ^ static_cast<unsigned char>(ch));
        uint64_t h2 = mix(h);
        std::memcpy(d->uuid.bytes, &h, 8);
        std::memcpy(d->uuid.bytes + 8, &h2, 8);
        d->rng = mix(c.seed ^ (static_cast<uint64_t>(phys) << 40));
        devices().push_back(d);
    }
}

// Takes the exclusive-process lock of d (lock held by the caller).
CUresult claim_exclusive(Device *d) {
    const Config &c = config();
    if (c.compute_mode == MODE_PROHIBITED) {
        say("device %d is in PROHIBITED compute mode: no context can be created on it", d->index);
        return DEVICE_UNAVAILABLE;
    }
    if (c.compute_mode != MODE_EXCLUSIVE_PROCESS) return OK;
    if (c.state_dir.empty()) {
        say("EXCLUSIVE_PROCESS mode without HIMENO_EMU_STATE_DIR: other processes are not seen");
        return OK;
    }
    std::string path = c.state_dir + "/device-" + host_name() + "-" + std::to_string(d->index) + ".lock";
    int fd = open(path.c_str(), O_CREAT | O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        say("cannot open %s for the EXCLUSIVE_PROCESS lock", path.c_str());
        return UNKNOWN;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        close(fd);
        return DEVICE_UNAVAILABLE;
    }
    d->lock_fd = fd;
    return OK;
}

Context *new_context(Device *d) {
    auto *c = new Context();
    c->dev = d;
    c->null_stream = new Stream();
    c->null_stream->ctx = c;
    return c;
}


// Queues a copy of n bytes from src to dst, run by `copy`; the touched
// ranges decide whether the destination may be poisoned now.
CUresult queue_copy(Context *ctx, Stream *s, const char *what, char *dst, const char *src, size_t n,
                    bool poison_dst, std::function<CUresult()> copy, std::shared_ptr<Mark> done = nullptr) {
    auto op = std::make_unique<Op>();
    op->what = what;
    op->run = std::move(copy);
    op->record = std::move(done);
    op->touches = {{dst, n}, {src, n}};
    Device *d = ctx->dev;
    {
        std::lock_guard<std::mutex> g(d->mu);
        if (poison_dst && n && !pending_touch(d, dst, n)) poison(dst, n, POISON_PENDING);
    }
    return enqueue(ctx, s, std::move(op));
}

}  // namespace

Device *emu::device(int ordinal) { return dev_of(ordinal); }
int emu::device_count() { return static_cast<int>(devices().size()); }

void emu::wake_all_devices() {
    for (Device *d : devices()) d->changed.notify_all();
}

EXPORT const char *himeno_emu_describe(void) { return describe(); }

// The calling thread's host waits for the device (stream, event and
// context synchronisations that find work to wait for, blocking copies
// and frees) and the bytes it
// copied between host and device, since the thread started: the GPU
// backend reads them around its iterations (a real driver has no such
// symbol, and then nothing is reported).
EXPORT void himeno_emu_host_counts(uint64_t *waits, uint64_t *bytes) {
    if (waits) *waits = thread_waits();
    if (bytes) *bytes = thread_bytes();
}

EXPORT CUresult cuGetErrorString(CUresult e, const char **out) {
    if (!out) return INVALID_VALUE;
    *out = error_string(e);
    return *out ? OK : INVALID_VALUE;
}

EXPORT CUresult cuGetErrorName(CUresult e, const char **out) {
    if (!out) return INVALID_VALUE;
    *out = error_name(e);
    return *out ? OK : INVALID_VALUE;
}

EXPORT CUresult cuDriverGetVersion(int *v) {
    if (!v) return INVALID_VALUE;
    *v = config().driver_version;
    return OK;
}

EXPORT CUresult cuInit(unsigned flags) {
    static std::once_flag once;
    static CUresult result = OK;
    if (flags != 0) return INVALID_VALUE;
    std::call_once(once, [] {
        if (!config_error().empty()) {
            say("%s", config_error().c_str());
            result = INVALID_VALUE;
            return;
        }
        make_devices();
        result = devices().empty() ? NO_DEVICE : OK;
        if (result == OK) g_init = true;
    });
    return result;
}

EXPORT CUresult cuDeviceGetCount(int *n) {
    NEED_INIT();
    if (!n) return INVALID_VALUE;
    *n = static_cast<int>(devices().size());
    return OK;
}

EXPORT CUresult cuDeviceGet(CUdevice *d, int ordinal) {
    NEED_INIT();
    if (!d) return INVALID_VALUE;
    if (!dev_of(ordinal)) return INVALID_DEVICE;
    *d = ordinal;
    return OK;
}

EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice d) {
    NEED_INIT();
    if (!dev_of(d)) return INVALID_DEVICE;
    if (!name || len <= 0) return INVALID_VALUE;
    std::snprintf(name, static_cast<size_t>(len), "%s", config().name.c_str());
    return OK;
}

EXPORT CUresult cuDeviceGetUuid(CUuuid *u, CUdevice d) {
    NEED_INIT();
    Device *dv = dev_of(d);
    if (!dv) return INVALID_DEVICE;
    if (!u) return INVALID_VALUE;
    *u = dv->uuid;
    return OK;
}

EXPORT CUresult cuDeviceGetUuid_v2(CUuuid *u, CUdevice d) { return cuDeviceGetUuid(u, d); }

EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice d) {
    NEED_INIT();
    if (!dev_of(d)) return INVALID_DEVICE;
    if (!bytes) return INVALID_VALUE;
    *bytes = config().memory;
    return OK;
}

EXPORT CUresult cuDeviceGetAttribute(int *v, int attr, CUdevice d) {
    NEED_INIT();
    Device *dv = dev_of(d);
    if (!dv) return INVALID_DEVICE;
    if (!v) return INVALID_VALUE;
    const Config &c = config();
    switch (attr) {
        case MAX_THREADS_PER_BLOCK: *v = 1024; break;
        case MAX_BLOCK_DIM_X: case MAX_BLOCK_DIM_Y: *v = 1024; break;
        case MAX_BLOCK_DIM_Z: *v = 64; break;
        case MAX_GRID_DIM_X: *v = 2147483647; break;
        case MAX_GRID_DIM_Y: case MAX_GRID_DIM_Z: *v = 65535; break;
        case MAX_SHARED_MEMORY_PER_BLOCK: *v = 48 << 10; break;
        case TOTAL_CONSTANT_MEMORY: *v = 64 << 10; break;
        case WARP_SIZE: *v = 32; break;
        case MAX_REGISTERS_PER_BLOCK: case MAX_REGISTERS_PER_MULTIPROCESSOR: *v = 65536; break;
        case CLOCK_RATE: *v = 1980000; break;
        case MULTIPROCESSOR_COUNT: *v = c.sms; break;
        case COMPUTE_MODE: *v = c.compute_mode; break;
        case CONCURRENT_KERNELS: *v = 1; break;
        case PCI_BUS_ID: *v = 0x10 + dv->index; break;
        case PCI_DEVICE_ID: case PCI_DOMAIN_ID: *v = 0; break;
        case MEMORY_CLOCK_RATE: *v = 2619000; break;
        case GLOBAL_MEMORY_BUS_WIDTH: *v = 6144; break;
        case L2_CACHE_SIZE: *v = 50 << 20; break;
        case MAX_THREADS_PER_MULTIPROCESSOR: *v = 2048; break;
        case ASYNC_ENGINE_COUNT: *v = 2; break;
        case UNIFIED_ADDRESSING: *v = 1; break;
        case COMPUTE_CAPABILITY_MAJOR: *v = c.cc_major; break;
        case COMPUTE_CAPABILITY_MINOR: *v = c.cc_minor; break;
        case MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: *v = 228 << 10; break;
        case MEMORY_POOLS_SUPPORTED: *v = c.pools != 0; break;
        default: *v = 0; break;
    }
    return OK;
}

EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *out, CUdevice d) {
    NEED_INIT();
    Device *dv = dev_of(d);
    if (!dv) return INVALID_DEVICE;
    if (!out) return INVALID_VALUE;
    std::lock_guard<std::mutex> g(dv->mu);
    if (!dv->primary) dv->primary = new_context(dv);
    Context *c = dv->primary;
    if (c->refs == 0) {
        CUresult r = claim_exclusive(dv);
        if (r != OK) return r;
        c->alive = true;
        c->sticky = OK;
        dv->streams.push_back(c->null_stream);
        c->null_stream->destroyed = false;
    }
    ++c->refs;
    *out = c;
    return OK;
}

EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) {
    NEED_INIT();
    Device *dv = dev_of(d);
    if (!dv) return INVALID_DEVICE;
    Context *c = dv->primary;
    {
        std::lock_guard<std::mutex> g(dv->mu);
        if (!c || c->refs == 0) return INVALID_CONTEXT;
        if (--c->refs > 0) return OK;
    }
    // The last reference: the context and everything in it go.
    drain(c, nullptr);
    std::lock_guard<std::mutex> g(dv->mu);
    if (c->refs > 0) return OK;
    c->alive = false;
    destroy_streams(c);
    free_context_memory(c);
    if (dv->lock_fd >= 0) {
        close(dv->lock_fd);
        dv->lock_fd = -1;
    }
    return OK;
}

EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice d) { return cuDevicePrimaryCtxRelease_v2(d); }

EXPORT CUresult cuDevicePrimaryCtxGetState(CUdevice d, unsigned *flags, int *active) {
    NEED_INIT();
    Device *dv = dev_of(d);
    if (!dv) return INVALID_DEVICE;
    if (flags) *flags = 0;
    if (active) *active = dv->primary && dv->primary->refs > 0;
    return OK;
}

EXPORT CUresult cuCtxSetCurrent(CUcontext c) {
    NEED_INIT();
    if (c && !c->alive) return INVALID_CONTEXT;
    current() = c;
    return OK;
}

EXPORT CUresult cuCtxGetCurrent(CUcontext *c) {
    NEED_INIT();
    if (!c) return INVALID_VALUE;
    *c = current();
    return OK;
}

EXPORT CUresult cuCtxGetDevice(CUdevice *d) {
    NEED_CTX(ctx);
    if (!d) return INVALID_VALUE;
    for (size_t i = 0; i < devices().size(); ++i) {
        if (devices()[i] == ctx->dev) *d = static_cast<int>(i);
    }
    return OK;
}

EXPORT CUresult cuCtxSynchronize(void) {
    NEED_CTX(ctx);
    if (!idle(ctx, nullptr)) count_wait();
    return drain(ctx, nullptr);
}

EXPORT CUresult cuCtxGetStreamPriorityRange(int *least, int *greatest) {
    NEED_CTX(ctx);
    if (least) *least = 0;
    if (greatest) *greatest = -5;
    return OK;
}

EXPORT CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total) {
    NEED_CTX(ctx);
    unsigned long long used = device_used(ctx->dev->index), all = config().memory;
    if (free_bytes) *free_bytes = used < all ? all - used : 0;
    if (total) *total = all;
    return OK;
}

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t bytes) {
    NEED_CTX(ctx);
    if (!p || bytes == 0) return INVALID_VALUE;
    return device_alloc(ctx, bytes, p, config().host_addressable);
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr p) {
    NEED_CTX(ctx);
    // Synchronous: waits for the work that may still use it.
    count_wait();
    CUresult r = drain(ctx, nullptr);
    if (r != OK) return r;
    return device_free(ctx, p);
}

EXPORT CUresult cuMemAllocAsync(CUdeviceptr *p, size_t bytes, CUstream hs) {
    NEED_CTX(ctx);
    if (config().pools != 1) return NOT_SUPPORTED;
    Stream *s;
    if (CUresult r = resolve(ctx, hs, &s)) return r;
    if (!p || bytes == 0) return INVALID_VALUE;
    return device_alloc(ctx, bytes, p);
}

EXPORT CUresult cuMemFreeAsync(CUdeviceptr p, CUstream hs) {
    NEED_CTX(ctx);
    if (config().pools != 1) return NOT_SUPPORTED;
    Stream *s;
    if (CUresult r = resolve(ctx, hs, &s)) return r;
    if (!device_pointer(ctx, p)) return INVALID_VALUE;
    auto op = std::make_unique<Op>();
    op->what = "cuMemFreeAsync";
    op->run = [ctx, p] { return device_free(ctx, p); };
    return enqueue(ctx, s, std::move(op));
}

EXPORT CUresult cuMemHostAlloc(void **p, size_t bytes, unsigned flags) {
    NEED_CTX(ctx);
    (void)flags;
    if (!p) return INVALID_VALUE;
    // A sandbox may refuse to lock large host buffers.
    if (config().pinned_max && bytes > config().pinned_max) return OUT_OF_MEMORY;
    return pinned_alloc(bytes, p);
}

EXPORT CUresult cuMemAllocHost_v2(void **p, size_t bytes) { return cuMemHostAlloc(p, bytes, 0); }

EXPORT CUresult cuMemFreeHost(void *p) {
    NEED_CTX(ctx);
    count_wait();
    CUresult r = drain(ctx, nullptr);
    if (r != OK) return r;
    return pinned_free(p);
}

EXPORT CUresult cuMemsetD8Async(CUdeviceptr p, unsigned char v, size_t n, CUstream hs) {
    NEED_CTX(ctx);
    Stream *s;
    if (CUresult r = resolve(ctx, hs, &s)) return r;
    char *h = device_range(ctx, p, n);
    if (!h) return INVALID_VALUE;
    auto op = std::make_unique<Op>();
    op->what = "cuMemsetD8Async";
    op->touches = {{h, n}};
    op->run = [h, v, n] {
        std::memset(h, v, n);
        return OK;
    };
    return enqueue(ctx, s, std::move(op));
}

EXPORT CUresult cuMemsetD8_v2(CUdeviceptr p, unsigned char v, size_t n) {
    NEED_CTX(ctx);
    CUresult r = cuMemsetD8Async(p, v, n, nullptr);
    count_wait();
    return r != OK ? r : drain(ctx, ctx->null_stream);
}

EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream hs) {
    NEED_CTX(ctx);
    Stream *s;
    if (CUresult r = resolve(ctx, hs, &s)) return r;
    char *d = device_range(ctx, dst, n);
    if (!d || (!src && n)) return INVALID_VALUE;
    count_bytes(n);
    if (is_pinned(src, n)) {
        // Page-locked: the device reads host memory when the copy runs.
        const char *from = static_cast<const char *>(src);
        return queue_copy(ctx, s, "cuMemcpyHtoDAsync (pinned)", d, from, n, true, [d, from, n] {
            std::memcpy(d, from, n);
            return OK;
        });
    }
    // Pageable: staged at once, as CUDA documents; the device copy is later.
    auto staged = std::make_shared<std::vector<char>>(static_cast<const char *>(src),
                                                      static_cast<const char *>(src) + n);
    return queue_copy(ctx, s, "cuMemcpyHtoDAsync (pageable)", d, staged->data(), n, true, [d, staged, n] {
        std::memcpy(d, staged->data(), n);
        return OK;
    });
}

EXPORT CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, CUstream hs) {
    NEED_CTX(ctx);
    Stream *s;
    if (CUresult r = resolve(ctx, hs, &s)) return r;
    char *from = device_range(ctx, src, n);
    if (!from || (!dst && n)) return INVALID_VALUE;
    char *to = static_cast<char *>(dst);
    count_bytes(n);
    auto copy = [to, from, n] {
        std::memcpy(to, from, n);
        return OK;
    };
    if (is_pinned(dst, n)) {
        // Page-locked: host memory changes when the copy runs.
        return queue_copy(ctx, s, "cuMemcpyDtoHAsync (pinned)", to, from, n, true, copy);
    }
    // Pageable: returns once the copy is complete, as CUDA documents.
    auto done = std::make_shared<Mark>();
    CUresult r = queue_copy(ctx, s, "cuMemcpyDtoHAsync (pageable)", to, from, n, false, copy, done);
    if (r != OK) return r;
    count_wait();
    return wait_mark(ctx, done);
}

EXPORT CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream hs) {
    NEED_CTX(ctx);
    Stream *s;
    if (CUresult r = resolve(ctx, hs, &s)) return r;
    char *to = device_range(ctx, dst, n);
    char *from = device_range(ctx, src, n);
    if (!to || !from) return INVALID_VALUE;
    return queue_copy(ctx, s, "cuMemcpyDtoDAsync", to, from, n, true, [to, from, n] {
        std::memmove(to, from, n);
        return OK;
    });
}

EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n) {
    NEED_CTX(ctx);
    CUresult r = cuMemcpyHtoDAsync_v2(dst, src, n, nullptr);
    count_wait();
    return r != OK ? r : drain(ctx, ctx->null_stream);
}

EXPORT CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n) {
    NEED_CTX(ctx);
    // One wait, though a pageable copy waited for itself already.
    uint64_t before = thread_waits();
    CUresult r = cuMemcpyDtoHAsync_v2(dst, src, n, nullptr);
    if (thread_waits() == before) count_wait();
    return r != OK ? r : drain(ctx, ctx->null_stream);
}

EXPORT CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n) {
    NEED_CTX(ctx);
    CUresult r = cuMemcpyDtoDAsync_v2(dst, src, n, nullptr);
    count_wait();
    return r != OK ? r : drain(ctx, ctx->null_stream);
}

// A copy between the memory of two contexts (two devices, or one), queued
// on a stream of the current context; the destination is poisoned until
// it runs, as for any copy, unless work of its device still uses it.
EXPORT CUresult cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx, size_t n,
                                  CUstream hs) {
    NEED_CTX(ctx);
    Stream *s;
    if (CUresult r = resolve(ctx, hs, &s)) return r;
    if (!dctx || !sctx || !dctx->alive || !sctx->alive) return INVALID_CONTEXT;
    char *to = device_range(dctx, dst, n);
    char *from = device_range(sctx, src, n);
    if (!to || !from) return INVALID_VALUE;
    auto op = std::make_unique<Op>();
    op->what = "cuMemcpyPeerAsync";
    op->touches = {{to, n}, {from, n}};
    op->run = [to, from, n] {
        std::memmove(to, from, n);
        return OK;
    };
    {
        std::lock_guard<std::mutex> g(dctx->dev->mu);
        if (n && !pending_touch(dctx->dev, to, n)) poison(to, n, POISON_PENDING);
    }
    return enqueue(ctx, s, std::move(op));
}

EXPORT CUresult cuDeviceCanAccessPeer(int *can, CUdevice d, CUdevice peer) {
    NEED_INIT();
    if (!dev_of(d) || !dev_of(peer)) return INVALID_DEVICE;
    if (!can) return INVALID_VALUE;
    // Every pair of distinct emulated devices, as GPUs behind one NVLink
    // switch; a device is not its own peer.
    *can = d != peer;
    return OK;
}

// Peer access of the current context to `peer`'s memory: granted once
// (again: PEER_ACCESS_ALREADY_ENABLED, as CUDA answers).
EXPORT CUresult cuCtxEnablePeerAccess(CUcontext peer, unsigned flags) {
    NEED_CTX(ctx);
    if (flags != 0) return INVALID_VALUE;
    if (!peer || !peer->alive) return INVALID_CONTEXT;
    if (peer->dev == ctx->dev) return INVALID_DEVICE;
    std::lock_guard<std::mutex> g(ctx->dev->mu);
    if (std::find(ctx->peers.begin(), ctx->peers.end(), peer) != ctx->peers.end()) {
        return PEER_ACCESS_ALREADY_ENABLED;
    }
    ctx->peers.push_back(peer);
    return OK;
}

EXPORT CUresult cuStreamCreateWithPriority(CUstream *out, unsigned flags, int priority) {
    NEED_CTX(ctx);
    (void)flags;
    if (!out) return INVALID_VALUE;
    auto *s = new Stream();
    s->ctx = ctx;
    s->priority = std::max(-5, std::min(0, priority));
    std::lock_guard<std::mutex> g(ctx->dev->mu);
    s->ordinal = ctx->dev->next_stream++;
    ctx->streams.push_back(s);
    ctx->dev->streams.push_back(s);
    *out = s;
    return OK;
}

EXPORT CUresult cuStreamCreate(CUstream *out, unsigned flags) { return cuStreamCreateWithPriority(out, flags, 0); }

EXPORT CUresult cuStreamDestroy_v2(CUstream hs) {
    NEED_CTX(ctx);
    if (!hs || hs->ctx != ctx || hs->destroyed) return INVALID_HANDLE;
    Device *d = ctx->dev;
    std::lock_guard<std::mutex> g(d->mu);
    // Destroyed now; its queued work still runs, as CUDA documents.
    hs->destroyed = true;
    ctx->streams.erase(std::remove(ctx->streams.begin(), ctx->streams.end(), hs), ctx->streams.end());
    if (hs->queue.empty() && !hs->busy) {
        d->streams.erase(std::remove(d->streams.begin(), d->streams.end(), hs), d->streams.end());
    }
    return OK;
}

EXPORT CUresult cuStreamSynchronize(CUstream hs) {
    NEED_CTX(ctx);
    Stream *s;
    if (CUresult r = resolve(ctx, hs, &s)) return r;
    if (!idle(ctx, s)) count_wait();
    return drain(ctx, s);
}

EXPORT CUresult cuStreamQuery(CUstream hs) {
    NEED_CTX(ctx);
    Stream *s;
    if (CUresult r = resolve(ctx, hs, &s)) return r;
    std::lock_guard<std::mutex> g(ctx->dev->mu);
    return s->queue.empty() ? OK : NOT_READY;
}

EXPORT CUresult cuStreamWaitEvent(CUstream hs, CUevent e, unsigned flags) {
    NEED_CTX(ctx);
    (void)flags;
    Stream *s;
    if (CUresult r = resolve(ctx, hs, &s)) return r;
    // An event of another context (another device) may be waited for, as
    // CUDA allows: the peer copies wait for the neighbour's pack.
    if (!e || !e->ctx || !e->ctx->alive) return INVALID_HANDLE;
    std::shared_ptr<Mark> last;
    {
        std::lock_guard<std::mutex> g(e->ctx->dev->mu);
        last = e->last;
    }
    if (!last) return OK;  // never recorded: nothing to wait for
    auto op = std::make_unique<Op>();
    op->what = "cuStreamWaitEvent";
    op->wait = last;
    return enqueue(ctx, s, std::move(op));
}

EXPORT CUresult cuEventCreate(CUevent *out, unsigned flags) {
    NEED_CTX(ctx);
    if (!out) return INVALID_VALUE;
    auto *e = new EmuEvent();
    e->ctx = ctx;
    e->flags = flags;
    *out = e;
    return OK;
}

EXPORT CUresult cuEventRecord(CUevent e, CUstream hs) {
    NEED_CTX(ctx);
    Stream *s;
    if (CUresult r = resolve(ctx, hs, &s)) return r;
    if (!e || e->ctx != ctx) return INVALID_HANDLE;
    auto m = std::make_shared<Mark>();
    auto op = std::make_unique<Op>();
    op->what = "cuEventRecord";
    op->record = m;
    if (CUresult r = enqueue(ctx, s, std::move(op))) return r;
    // Published once its record is queued (and its device known): a wait
    // taken from another thread in between would otherwise hold a mark no
    // queued work records, which the scheduler reports as a deadlock
    // ("can never run"; seen once with in-process ranks under load).
    std::lock_guard<std::mutex> g(ctx->dev->mu);
    e->last = m;
    return OK;
}

EXPORT CUresult cuEventQuery(CUevent e) {
    NEED_CTX(ctx);
    if (!e || e->ctx != ctx) return INVALID_HANDLE;
    std::lock_guard<std::mutex> g(ctx->dev->mu);
    return !e->last || e->last->done ? OK : NOT_READY;
}

EXPORT CUresult cuEventSynchronize(CUevent e) {
    NEED_CTX(ctx);
    if (!e || e->ctx != ctx) return INVALID_HANDLE;
    std::shared_ptr<Mark> m;
    {
        std::lock_guard<std::mutex> g(ctx->dev->mu);
        m = e->last;
    }
    if (m && !m->done) count_wait();
    return m ? wait_mark(ctx, m) : OK;
}

EXPORT CUresult cuEventElapsedTime(float *ms, CUevent a, CUevent b) {
    NEED_CTX(ctx);
    if (!ms) return INVALID_VALUE;
    if (!a || !b || a->ctx != ctx || b->ctx != ctx) return INVALID_HANDLE;
    if ((a->flags | b->flags) & EVENT_DISABLE_TIMING) return INVALID_HANDLE;
    std::lock_guard<std::mutex> g(ctx->dev->mu);
    if (!a->last || !b->last) return INVALID_HANDLE;
    if (!a->last->done || !b->last->done) return NOT_READY;
    *ms = static_cast<float>((b->last->ns - a->last->ns) / 1e6);
    return OK;
}

EXPORT CUresult cuEventElapsedTime_v2(float *ms, CUevent a, CUevent b) { return cuEventElapsedTime(ms, a, b); }

EXPORT CUresult cuEventDestroy_v2(CUevent e) {
    NEED_INIT();
    if (!e) return INVALID_HANDLE;
    // Kept (as a tombstone) so that a stale handle is refused, not a crash.
    e->ctx = nullptr;
    return OK;
}

EXPORT CUresult cuModuleLoadData(CUmodule *out, const void *image) {
    NEED_CTX(ctx);
    if (!out) return INVALID_VALUE;
    auto m = std::make_unique<EmuModule>();
    m->ctx = ctx;
    std::string why;
    CUresult r = parse_image(image, &m->image, &why);
    if (r != OK) {
        say("cuModuleLoadData refuses the image: %s", why.c_str());
        return r;
    }
    const Config &c = config();
    int sm = c.cc_major * 10 + c.cc_minor;
    if (m->image.cubin) {
        if (m->image.arch / 10 != c.cc_major || m->image.arch > sm) {
            say("cuModuleLoadData: a CUBIN for sm_%d does not run on a device of compute capability %d.%d",
                m->image.arch, c.cc_major, c.cc_minor);
            return NO_BINARY_FOR_GPU;
        }
        if (m->image.new_abi && c.driver_version < 13000) {
            say("cuModuleLoadData: a CUDA 13 CUBIN does not load on a driver of CUDA %d.%d",
                c.driver_version / 1000, c.driver_version % 1000 / 10);
            return NO_BINARY_FOR_GPU;
        }
    } else {
        if (m->image.arch > sm) {
            say("cuModuleLoadData: PTX for sm_%d does not run on compute capability %d.%d", m->image.arch,
                c.cc_major, c.cc_minor);
            return NO_BINARY_FOR_GPU;
        }
        if (m->image.ptx_version > ptx_limit(c.driver_version)) {
            say("cuModuleLoadData: PTX ISA %d.%d is newer than a driver of CUDA %d.%d loads",
                m->image.ptx_version / 10, m->image.ptx_version % 10, c.driver_version / 1000,
                c.driver_version % 1000 / 10);
            return UNSUPPORTED_PTX_VERSION;
        }
    }
    *out = m.release();
    return OK;
}

EXPORT CUresult cuModuleUnload(CUmodule m) {
    NEED_INIT();
    if (!m) return INVALID_HANDLE;
    // Functions of it stay valid handles that refuse to launch.
    m->ctx = nullptr;
    return OK;
}

EXPORT CUresult cuModuleGetFunction(CUfunction *out, CUmodule m, const char *name) {
    NEED_CTX(ctx);
    if (!out || !m || !name) return INVALID_VALUE;
    if (m->ctx != ctx) return INVALID_HANDLE;
    const ImageKernel *ik = nullptr;
    for (const auto &k : m->image.kernels) {
        if (k.name == name) ik = &k;
    }
    if (!ik) return NOT_FOUND;
    const HostKernel *hk = host_kernel(name);
    if (!hk) {
        say("kernel %s is in the image but not in the emulator's host build: rebuild it "
            "(scripts/cuda-emu.sh build)", name);
        return NOT_FOUND;
    }
    bool same = hk->params.size() == ik->params.size();
    for (size_t i = 0; same && i < ik->params.size(); ++i) same = hk->params[i].size == ik->params[i];
    if (!same) {
        std::string a, b;
        for (unsigned s : ik->params) a += std::to_string(s) + " ";
        for (const Param &p : hk->params) b += std::to_string(p.size) + " ";
        say("kernel %s: the image declares parameters of sizes [ %s] but the emulator's host build "
            "[ %s]: rebuild it (scripts/cuda-emu.sh build)", name, a.c_str(), b.c_str());
        return INVALID_IMAGE;
    }
    auto f = std::make_unique<EmuFunction>();
    f->module = m;
    f->image = ik;
    f->host = hk;
    *out = f.get();
    m->functions.push_back(std::move(f));
    return OK;
}

EXPORT CUresult cuFuncGetAttribute(int *v, int attr, CUfunction f) {
    NEED_INIT();
    if (!v || !f) return INVALID_VALUE;
    switch (attr) {
        case FUNC_MAX_THREADS_PER_BLOCK: {
            unsigned bound = f->image->max_threads[0] * std::max(1u, f->image->max_threads[1]) *
                             std::max(1u, f->image->max_threads[2]);
            unsigned regs = f->image->registers ? 65536 / f->image->registers / 32 * 32 : 1024;
            *v = static_cast<int>(std::min({1024u, bound ? bound : 1024u, regs}));
            return OK;
        }
        case FUNC_SHARED_SIZE_BYTES: *v = static_cast<int>(f->image->shared_bytes); return OK;
        case FUNC_NUM_REGS: *v = static_cast<int>(f->image->registers); return OK;
        default: *v = 0; return OK;
    }
}

EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                               unsigned bz, unsigned shared, CUstream hs, void **params, void **extra) {
    NEED_CTX(ctx);
    if (!f || !f->module->ctx) return INVALID_HANDLE;
    if (f->module->ctx != ctx) return INVALID_CONTEXT;
    Stream *s;
    if (CUresult r = resolve(ctx, hs, &s)) return r;
    const char *name = f->image->name.c_str();
    auto refuse = [&](CUresult r, const std::string &why) {
        say("cuLaunchKernel refuses %s<<<(%u,%u,%u), (%u,%u,%u)>>>: %s", name, gx, gy, gz, bx, by, bz, why.c_str());
        return r;
    };
    if (extra) return refuse(INVALID_VALUE, "the extra argument is not supported");
    if (!gx || !gy || !gz || gy > 65535 || gz > 65535 || gx > 2147483647u)
        return refuse(INVALID_VALUE, "grid dimensions outside 1..2^31-1 x 1..65535 x 1..65535");
    unsigned long long threads = 1ull * bx * by * bz;
    if (!bx || !by || !bz || bx > 1024 || by > 1024 || bz > 64 || threads > 1024)
        return refuse(INVALID_VALUE, "block dimensions outside 1024 x 1024 x 64 or over 1024 threads");
    const unsigned *mt = f->image->max_threads;
    if (mt[0] && threads > 1ull * mt[0] * std::max(1u, mt[1]) * std::max(1u, mt[2]))
        return refuse(INVALID_VALUE, "more threads per block than its __launch_bounds__ allow");
    unsigned regs = f->image->registers;
    if (regs && 1ull * regs * ((threads + 31) / 32 * 32) > 65536)
        return refuse(LAUNCH_OUT_OF_RESOURCES, std::to_string(regs) + " registers per thread times " +
                                                   std::to_string(threads) + " threads exceed 65536");
    if (shared + f->image->shared_bytes > (48u << 10))
        return refuse(INVALID_VALUE, "more than 48 KiB of shared memory per block");
    Launch l{f, Dim3{gx, gy, gz}, Dim3{bx, by, bz}, nullptr};
    std::string why;
    if (!f->host->decode(params, ctx, &l.args, &why)) return refuse(INVALID_VALUE, why);
    count_launch(name);
    const Config &c = config();
    bool fail = false;
    if (c.fail_launch_device < 0 || c.fail_launch_device == ctx->dev->index) {
        fail = ++g_launches == c.fail_launch;
    }
    auto op = std::make_unique<Op>();
    op->what = std::string("kernel ") + name;
    // A kernel may use all of any allocation it is given.
    for (size_t i = 0; i < f->host->params.size(); ++i) {
        uint64_t raw;
        char *base;
        size_t n;
        if (f->host->params[i].pointer && read_slot(params, i, f->host->params.size(), 8, &raw, &why) &&
            device_extent(ctx, raw, &base, &n)) {
            op->touches.emplace_back(base, n);
        }
    }
    Device *dev = ctx->dev;
    unsigned long long all = threads * gx * gy * gz;
    op->run = [l, fail, name = std::string(name), dev, all]() -> CUresult {
        if (fail) {
            say("kernel %s fails as HIMENO_EMU_FAIL_LAUNCH asks (sticky CUDA_ERROR_LAUNCH_FAILED)", name.c_str());
            return LAUNCH_FAILED;
        }
        CUresult r = execute(l);
        // The emulated NVML energy counter (nvml.cpp): a microjoule per thread run.
        if (r == OK) dev->energy_uj.fetch_add(all);
        return r;
    };
    return enqueue(ctx, s, std::move(op));
}

// NVRTC 13 loads the driver and asks for its private export tables; the
// emulated driver has none, and NVRTC then compiles without them.
EXPORT CUresult cuGetExportTable(const void **table, const CUuuid *id) {
    (void)id;
    if (table) *table = nullptr;
    return NOT_SUPPORTED;
}

// Internal state of the emulated CUDA driver: configuration, devices,
// contexts, memory, modules, streams and the work queued on them. The
// exported entry points (driver.cpp) are thin layers over these.
//
// The opaque handles of the driver API (CUcontext, CUstream, ...) point to
// the Emu* structures below.
#pragma once

#include "api.h"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace emu {

// ---- configuration (config.cpp) -------------------------------------

// What the emulated devices answer and how the emulator behaves, read once
// from the HIMENO_EMU_* variables (docs/testing.md, "The emulated GPU").
struct Config {
    int devices = 1;                          // HIMENO_EMU_DEVICES
    std::vector<int> visible;                 // after CUDA_VISIBLE_DEVICES
    std::string name = "himeno emulated GPU";  // HIMENO_EMU_NAME
    int cc_major = 9, cc_minor = 0;           // HIMENO_EMU_CC
    int sms = 132;                            // HIMENO_EMU_SMS
    unsigned long long memory = 16ull << 30;  // HIMENO_EMU_MEMORY
    unsigned long long pinned_max = 0;        // HIMENO_EMU_PINNED_MAX (0: no limit)
    int pools = 1;                            // HIMENO_EMU_POOLS: 1, 0, 2 = broken
    int compute_mode = MODE_DEFAULT;          // HIMENO_EMU_COMPUTE_MODE
    int driver_version = 13000;               // HIMENO_EMU_DRIVER_VERSION
    unsigned long long seed = 1;              // HIMENO_EMU_SEED
    int workers = 0;                          // HIMENO_EMU_WORKERS
    int eager_percent = 50;                   // HIMENO_EMU_EAGER
    long fail_alloc = 0;                      // HIMENO_EMU_FAIL_ALLOC=N[@DEV]
    int fail_alloc_device = -1;
    long fail_launch = 0;                     // HIMENO_EMU_FAIL_LAUNCH=N[@DEV]
    int fail_launch_device = -1;
    int connections = 8;                      // CUDA_DEVICE_MAX_CONNECTIONS
    std::string state_dir;                    // HIMENO_EMU_STATE_DIR
    bool host_addressable = false;            // HIMENO_EMU_HOST_ADDRESSABLE
    std::string launch_log;                   // HIMENO_EMU_LAUNCH_LOG
};

// The configuration. `why` is empty, or says which variable is malformed
// (cuInit then fails with it).
const Config &config();
const std::string &config_error();
// What himeno_emu_describe returns.
const char *describe();

// One line on stderr, prefixed "cuda-emu: ".
void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

// SplitMix64 step: the seeded choices of the scheduler.
uint64_t mix(uint64_t x);

}  // namespace emu

struct EmuContext;
struct EmuStream;

namespace emu {

using Context = EmuContext;
using Stream = EmuStream;

// ---- memory (memory.cpp) ---------------------------------------------

// Device addresses are host addresses plus this bias: a non-canonical
// address on x86-64 and AArch64, so host code that dereferences a device
// pointer faults at once, as it does with a real GPU.
constexpr uint64_t DEVICE_BIAS = 0x4000000000000000ull;

// NaN patterns (NaN as float and as double): fresh device memory, and the
// destinations of queued copies that have not run yet.
constexpr uint32_t POISON_FRESH = 0xFFFA5A5Au;
constexpr uint32_t POISON_PENDING = 0xFFF0DEADu;
void poison(void *p, size_t bytes, uint32_t pattern);

// Allocates device memory on ctx's device (counted, poisoned); counts
// toward HIMENO_EMU_FAIL_ALLOC. An `addressable` allocation has no bias:
// its device address is its host address, as with a CUDA-aware MPI that
// reads device memory itself (HIMENO_EMU_HOST_ADDRESSABLE, cuMemAlloc only).
CUresult device_alloc(Context *ctx, size_t bytes, CUdeviceptr *out, bool addressable = false);
// Frees the allocation whose base is p.
CUresult device_free(Context *ctx, CUdeviceptr p);
// The host address of device range [p, p + bytes) when it lies inside one
// live allocation of ctx, else nullptr.
char *device_range(Context *ctx, CUdeviceptr p, size_t bytes);
// The host address of device address p when it lies in (or at the end of)
// a live allocation of ctx, else nullptr.
char *device_pointer(Context *ctx, CUdeviceptr p);
// The whole allocation holding device address p.
bool device_extent(Context *ctx, CUdeviceptr p, char **base, size_t *bytes);
// Frees every allocation of a context that is destroyed.
void free_context_memory(Context *ctx);
// Bytes counted against device `index`'s memory.
unsigned long long device_used(int index);

CUresult pinned_alloc(size_t bytes, void **out);
CUresult pinned_free(void *p);
// Whether [p, p + bytes) lies in one page-locked allocation.
bool is_pinned(const void *p, size_t bytes);

// ---- images and kernels (image.cpp, kernels_host.cpp) ------------------

// One kernel as the loaded image declares it.
struct ImageKernel {
    std::string name;
    std::vector<unsigned> params;         // sizes in bytes, by ordinal
    unsigned max_threads[3] = {0, 0, 0};  // __launch_bounds__ (0: none)
    unsigned registers = 0;               // 0: the image does not say
    unsigned shared_bytes = 0;            // static __shared__ memory
};

// What an image holds.
struct Image {
    bool cubin = false;
    int arch = 0;          // sm_XY as XY
    int ptx_version = 0;   // PTX ISA version as major*10+minor (PTX only)
    bool new_abi = false;  // a CUBIN in the CUDA 13 format
    std::vector<ImageKernel> kernels;
};
// Parses a CUBIN (ELF) or PTX image; `why` says what is wrong with it.
CUresult parse_image(const void *data, Image *out, std::string *why);

// One parameter of a kernel of the host build.
struct Param {
    unsigned size;
    bool pointer;
};

// A kernel of the host build (the real kernels.cu compiled for the CPU).
struct HostKernel {
    const char *name;
    std::vector<Param> params;
    // Reads the arguments from the slots of himeno's launch protocol
    // (launch.cpp), translating device pointers; false with a message when
    // an argument is wrong.
    bool (*decode)(void **args, Context *ctx, std::shared_ptr<void> *out, std::string *why);
    // Runs the kernel body as the current emulated thread.
    void (*call)(void *decoded);
};
// The host build's kernel `name`, or nullptr.
const HostKernel *host_kernel(const std::string &name);
// Reads argument `i` of size `size` from `args` under the launch protocol
// into `out` (8 bytes); false with a message when the slot is wrong.
bool read_slot(void **args, size_t i, size_t count, unsigned size, uint64_t *out,
               std::string *why);
// Checks that `args` holds exactly `count` slots before the terminator.
bool check_count(void **args, size_t count, std::string *why);

// ---- devices ------------------------------------------------------------

struct Mark;

// A device: its identity and the scheduler of the work queued on it.
struct Device {
    int index = 0;  // physical index
    CUuuid uuid{};
    // Guards the device's contexts, streams and queued work.
    std::mutex mu;
    std::condition_variable changed;
    uint64_t rng = 0;
    unsigned next_stream = 0;
    std::vector<Stream *> streams;
    int lock_fd = -1;  // held while an exclusive-process context lives
    Context *primary = nullptr;
    int running = 0;   // ops executing now
    bool workers_started = false;
    // Microjoules the emulated NVML counter reports: one per kernel
    // thread run (nvml.cpp).
    std::atomic<uint64_t> energy_uj{0};
    // NCCL work queued and not yet run, and whether the background thread
    // that runs ready work while there is any has started (sched.cpp).
    int nccl_queued = 0;
    bool progress_started = false;
};
// The device of visible ordinal `ordinal`, or nullptr.
Device *device(int ordinal);
// Wakes the threads waiting on every device: a record that a stream of
// another device may wait for has run.
void wake_all_devices();
int device_count();

// ---- streams and queued work (sched.cpp) ------------------------------

// When an event's record ran: shared by the event and the waits that
// captured that record.
// Atomic: a stream of another device may wait for it (a peer copy's
// wait for the neighbour's pack), reading it under its own device's lock.
struct Mark {
    std::atomic<bool> done{false};
    double ns = 0;
    Device *dev = nullptr;  // the device whose stream records it
};

// One piece of queued work.
struct Op {
    std::string what;
    std::function<CUresult()> run;                     // the work
    std::shared_ptr<Mark> record;                      // an event record
    std::shared_ptr<Mark> wait;                        // waits for this record
    std::vector<std::pair<const char *, size_t>> touches;  // memory it uses
    // When set, the op may start only once this says so: work that waits
    // for something outside the device (an NCCL peer's data, nccl.cpp).
    std::function<bool()> poll;
    bool nccl = false;  // NCCL work: the device progresses while it is queued
};

// The calling thread's current context (reference).
Context *&current();
// The current context when it is usable, else the error to return.
CUresult usable(Context **out);
// The context's NULL stream when s is nullptr, else s (checked).
CUresult resolve(Context *ctx, CUstream s, Stream **out);
// Queues op on s.
CUresult enqueue(Context *ctx, Stream *s, std::unique_ptr<Op> op);
// Runs queued work until s has none left (nullptr: every stream of ctx).
CUresult drain(Context *ctx, Stream *s);
// Runs queued work until the record m has run.
CUresult wait_mark(Context *ctx, const std::shared_ptr<Mark> &m);
// The calling thread's host waits for the device (stream, event and
// context synchronisations, blocking copies) and host<->device bytes so
// far, which himeno_emu_host_counts reports; counted by the entry points,
// a synchronisation only when it has work to wait for (an event already
// recorded, an idle stream: nothing is waited for).
void count_wait();
// Whether s (nullptr: every stream of ctx) has nothing queued or running:
// a synchronisation then has nothing to wait for and is not counted.
bool idle(Context *ctx, Stream *s);
void count_bytes(size_t n);
uint64_t thread_waits();
uint64_t thread_bytes();
// Whether queued work of d touches [p, p + n). Called with d->mu held.
bool pending_touch(Device *d, const char *p, size_t n);
// Destroys a context's streams (called with d->mu held, nothing queued).
void destroy_streams(Context *ctx);
double now_ns();

// ---- kernel execution (fiber.cpp) -------------------------------------

struct Dim3 {
    unsigned x, y, z;
};

}  // namespace emu

struct EmuFunction;

namespace emu {
// One launch being executed.
struct Launch {
    const EmuFunction *fn;
    Dim3 grid, block;
    std::shared_ptr<void> args;
};

// Runs every block of l on the calling thread; OK, or the fault
// (ILLEGAL_ADDRESS, LAUNCH_FAILED) after saying what happened.
CUresult execute(const Launch &l);
// Installs the fault handlers (once per process).
void install_fault_handlers();
}  // namespace emu

// ---- the handles -------------------------------------------------------

struct EmuContext {
    emu::Device *dev = nullptr;
    int refs = 0;
    bool alive = false;
    std::atomic<CUresult> sticky{0};
    std::vector<EmuStream *> streams;
    EmuStream *null_stream = nullptr;
    std::vector<EmuContext *> peers;  // cuCtxEnablePeerAccess granted
};

struct EmuStream {
    EmuContext *ctx = nullptr;
    int priority = 0;
    unsigned ordinal = 0;
    bool destroyed = false;
    bool busy = false;
    std::deque<std::unique_ptr<emu::Op>> queue;
};

struct EmuEvent {
    EmuContext *ctx = nullptr;
    unsigned flags = 0;
    std::shared_ptr<emu::Mark> last;  // the latest record; null: never
};

struct EmuModule {
    EmuContext *ctx = nullptr;
    emu::Image image;
    std::vector<std::unique_ptr<EmuFunction>> functions;
};

struct EmuFunction {
    EmuModule *module = nullptr;
    const emu::ImageKernel *image = nullptr;
    const emu::HostKernel *host = nullptr;
};

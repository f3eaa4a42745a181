// Device and page-locked host memory. Device memory is host memory behind
// a biased address (DEVICE_BIAS), mapped so that each allocation's end
// abuts an inaccessible guard page: a kernel that reads or writes past an
// allocation faults, and the fault becomes CUDA_ERROR_ILLEGAL_ADDRESS.
// Fresh device memory is filled with a NaN pattern, as a real device's is
// with whatever the previous user left. With HIMENO_EMU_HOST_ADDRESSABLE=1
// memory from cuMemAlloc has no bias (host code, such as a CUDA-aware MPI,
// may read it), while pool memory keeps it: pool memory cannot be shared.
#include "emu.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <map>

namespace emu {
namespace {

struct Allocation {
    Context *ctx;
    int device;
    char *host;
    size_t bytes;
    char *map;
    size_t map_bytes;
    unsigned long long counted;
    bool addressable;  // device address == host address
};

std::mutex g_mu;
// Live device allocations by host base address.
std::map<char *, Allocation> g_device;
// Page-locked host allocations by base address (value: size).
std::map<const char *, size_t> g_pinned;
std::map<int, unsigned long long> g_used;
long g_allocs = 0;

size_t page() {
    static const size_t p = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    return p;
}

size_t round_up(size_t v, size_t to) { return (v + to - 1) / to * to; }

// The allocation holding host address h in [base, base + bytes], or null.
Allocation *holding(char *h) {
    auto it = g_device.upper_bound(h);
    if (it == g_device.begin()) return nullptr;
    --it;
    Allocation &a = it->second;
    return h <= a.host + a.bytes ? &a : nullptr;
}

// The allocation that device address p lies in (or at the end of), with
// p's host address in *h; null when none, or when p's bias is not the
// allocation's. Called with g_mu held.
Allocation *translate(CUdeviceptr p, char **h) {
    bool biased = p >= DEVICE_BIAS;
    *h = reinterpret_cast<char *>(biased ? p - DEVICE_BIAS : p);
    Allocation *a = holding(*h);
    return a && a->addressable != biased ? a : nullptr;
}

}  // namespace

void poison(void *p, size_t bytes, uint32_t pattern) {
    auto *w = static_cast<unsigned char *>(p);
    for (size_t i = 0; i < bytes; ++i) w[i] = static_cast<unsigned char>(pattern >> (8 * (i % 4)));
}

CUresult device_alloc(Context *ctx, size_t bytes, CUdeviceptr *out, bool addressable) {
    const Config &c = config();
    int dev = ctx->dev->index;
    // Counted as the pool allocates: in granules of 2 MiB.
    unsigned long long counted = round_up(bytes ? bytes : 1, 2u << 20);
    {
        std::lock_guard<std::mutex> g(g_mu);
        if (c.fail_alloc_device < 0 || c.fail_alloc_device == dev) {
            if (++g_allocs == c.fail_alloc) {
                say("allocation %ld (%zu bytes on device %d) fails as HIMENO_EMU_FAIL_ALLOC asks",
                    g_allocs, bytes, dev);
                return OUT_OF_MEMORY;
            }
        }
        if (g_used[dev] + counted > c.memory) return OUT_OF_MEMORY;
        g_used[dev] += counted;
    }
    size_t usable = round_up(bytes ? bytes : 1, 256);
    size_t body = round_up(usable, page());
    size_t map_bytes = body + 2 * page();
    void *m = mmap(nullptr, map_bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) {
        std::lock_guard<std::mutex> g(g_mu);
        g_used[dev] -= counted;
        return OUT_OF_MEMORY;
    }
    char *map = static_cast<char *>(m);
    if (mprotect(map + page(), body, PROT_READ | PROT_WRITE) != 0) {
        munmap(map, map_bytes);
        std::lock_guard<std::mutex> g(g_mu);
        g_used[dev] -= counted;
        return OUT_OF_MEMORY;
    }
    char *host = map + page() + body - usable;
    poison(host, usable, POISON_FRESH);
    std::lock_guard<std::mutex> g(g_mu);
    g_device[host] = Allocation{ctx, dev, host, bytes, map, map_bytes, counted, addressable};
    *out = reinterpret_cast<CUdeviceptr>(host) + (addressable ? 0 : DEVICE_BIAS);
    return OK;
}

CUresult device_free(Context *ctx, CUdeviceptr p) {
    Allocation a;
    {
        std::lock_guard<std::mutex> g(g_mu);
        char *host;
        if (!translate(p, &host)) return INVALID_VALUE;
        auto it = g_device.find(host);
        if (it == g_device.end() || it->second.ctx != ctx) return INVALID_VALUE;
        a = it->second;
        g_device.erase(it);
        g_used[a.device] -= a.counted;
    }
    munmap(a.map, a.map_bytes);
    return OK;
}

char *device_range(Context *ctx, CUdeviceptr p, size_t bytes) {
    char *h;
    std::lock_guard<std::mutex> g(g_mu);
    Allocation *a = translate(p, &h);
    if (!a || a->ctx != ctx || h + bytes > a->host + a->bytes) return nullptr;
    return h;
}

char *device_pointer(Context *ctx, CUdeviceptr p) { return device_range(ctx, p, 0); }

bool device_extent(Context *ctx, CUdeviceptr p, char **base, size_t *bytes) {
    char *h;
    std::lock_guard<std::mutex> g(g_mu);
    Allocation *a = translate(p, &h);
    if (!a || a->ctx != ctx) return false;
    *base = a->host;
    *bytes = a->bytes;
    return true;
}

void free_context_memory(Context *ctx) {
    std::vector<Allocation> gone;
    {
        std::lock_guard<std::mutex> g(g_mu);
        for (auto it = g_device.begin(); it != g_device.end();) {
            if (it->second.ctx == ctx) {
                gone.push_back(it->second);
                g_used[it->second.device] -= it->second.counted;
                it = g_device.erase(it);
            } else {
                ++it;
            }
        }
    }
    for (auto &a : gone) munmap(a.map, a.map_bytes);
}

unsigned long long device_used(int index) {
    std::lock_guard<std::mutex> g(g_mu);
    return g_used[index];
}

CUresult pinned_alloc(size_t bytes, void **out) {
    size_t n = round_up(bytes ? bytes : 1, page());
    void *m = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return OUT_OF_MEMORY;
    poison(m, n, POISON_FRESH);
    std::lock_guard<std::mutex> g(g_mu);
    g_pinned[static_cast<const char *>(m)] = n;
    *out = m;
    return OK;
}

CUresult pinned_free(void *p) {
    size_t n;
    {
        std::lock_guard<std::mutex> g(g_mu);
        auto it = g_pinned.find(static_cast<const char *>(p));
        if (it == g_pinned.end()) return INVALID_VALUE;
        n = it->second;
        g_pinned.erase(it);
    }
    munmap(p, n);
    return OK;
}

bool is_pinned(const void *p, size_t bytes) {
    const char *c = static_cast<const char *>(p);
    std::lock_guard<std::mutex> g(g_mu);
    auto it = g_pinned.upper_bound(c);
    if (it == g_pinned.begin()) return false;
    --it;
    return c + bytes <= it->first + it->second;
}

}  // namespace emu

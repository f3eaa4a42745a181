// The emulated devices' answers and the emulator's switches, read once from
// the environment. A malformed value is not guessed at: cuInit fails and
// says which variable is wrong.
#include "emu.h"

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>

namespace emu {
namespace {

std::string g_error;

// The value of variable `name`, or nullptr when unset or empty.
const char *get(const char *name) {
    const char *v = std::getenv(name);
    return v && *v ? v : nullptr;
}

// Parses a whole decimal number in [lo, hi].
bool number(const char *s, long long lo, long long hi, long long *out) {
    char *end = nullptr;
    errno = 0;
    long long v = std::strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return false;
    *out = v;
    return true;
}

void bad(const char *name, const char *value, const char *want) {
    if (g_error.empty()) {
        g_error = std::string(name) + "=" + value + ": " + want;
    }
}

// Reads an integer variable into `out` when set.
template <class T>
void integer(const char *name, long long lo, long long hi, T *out) {
    const char *v = get(name);
    long long n;
    if (!v) return;
    if (number(v, lo, hi, &n)) {
        *out = static_cast<T>(n);
    } else {
        bad(name, v, ("a whole number from " + std::to_string(lo) + " to " + std::to_string(hi)).c_str());
    }
}

// Bytes with an optional K, M or G suffix (powers of 1024).
void bytes(const char *name, unsigned long long *out) {
    const char *v = get(name);
    if (!v) return;
    std::string s(v);
    unsigned long long unit = 1;
    char last = s.empty() ? 0 : s.back();
    if (last == 'K' || last == 'k') unit = 1ull << 10;
    if (last == 'M' || last == 'm') unit = 1ull << 20;
    if (last == 'G' || last == 'g') unit = 1ull << 30;
    if (unit != 1) s.pop_back();
    long long n;
    if (!number(s.c_str(), 1, (1ll << 50) / static_cast<long long>(unit), &n)) {
        bad(name, v, "a byte count such as 1073741824, 512M or 80G");
        return;
    }
    *out = static_cast<unsigned long long>(n) * unit;
}

// N or N@DEVICE: the Nth event, counted from 1, optionally on one device.
void nth(const char *name, long *n, int *dev) {
    const char *v = get(name);
    if (!v) return;
    std::string s(v);
    auto at = s.find('@');
    long long count, d = -1;
    bool ok = number(s.substr(0, at).c_str(), 1, 1ll << 40, &count);
    if (ok && at != std::string::npos) ok = number(s.substr(at + 1).c_str(), 0, 1023, &d);
    if (!ok) {
        bad(name, v, "N or N@DEVICE (the Nth one, counted from 1)");
        return;
    }
    *n = static_cast<long>(count);
    *dev = static_cast<int>(d);
}

Config load() {
    Config c;
    integer("HIMENO_EMU_DEVICES", 0, 64, &c.devices);
    if (const char *v = get("HIMENO_EMU_NAME")) c.name = v;
    if (const char *v = get("HIMENO_EMU_CC")) {
        if (!std::strcmp(v, "9.0")) {
            c.cc_major = 9, c.cc_minor = 0;
        } else if (!std::strcmp(v, "8.0")) {
            c.cc_major = 8, c.cc_minor = 0;
        } else {
            bad("HIMENO_EMU_CC", v, "9.0 or 8.0");
        }
    }
    integer("HIMENO_EMU_SMS", 1, 1024, &c.sms);
    bytes("HIMENO_EMU_MEMORY", &c.memory);
    bytes("HIMENO_EMU_PINNED_MAX", &c.pinned_max);
    if (const char *v = get("HIMENO_EMU_POOLS")) {
        if (!std::strcmp(v, "1") || !std::strcmp(v, "on")) {
            c.pools = 1;
        } else if (!std::strcmp(v, "0") || !std::strcmp(v, "off")) {
            c.pools = 0;
        } else if (!std::strcmp(v, "broken")) {
            c.pools = 2;
        } else {
            bad("HIMENO_EMU_POOLS", v, "on, off or broken");
        }
    }
    if (const char *v = get("HIMENO_EMU_COMPUTE_MODE")) {
        if (!std::strcmp(v, "default")) {
            c.compute_mode = MODE_DEFAULT;
        } else if (!std::strcmp(v, "exclusive-process")) {
            c.compute_mode = MODE_EXCLUSIVE_PROCESS;
        } else if (!std::strcmp(v, "prohibited")) {
            c.compute_mode = MODE_PROHIBITED;
        } else {
            bad("HIMENO_EMU_COMPUTE_MODE", v, "default, exclusive-process or prohibited");
        }
    }
    integer("HIMENO_EMU_DRIVER_VERSION", 11000, 99999, &c.driver_version);
    integer("HIMENO_EMU_SEED", 0, (1ll << 62), &c.seed);
    integer("HIMENO_EMU_WORKERS", 0, 64, &c.workers);
    integer("HIMENO_EMU_EAGER", 0, 100, &c.eager_percent);
    nth("HIMENO_EMU_FAIL_ALLOC", &c.fail_alloc, &c.fail_alloc_device);
    nth("HIMENO_EMU_FAIL_LAUNCH", &c.fail_launch, &c.fail_launch_device);
    integer("CUDA_DEVICE_MAX_CONNECTIONS", 1, 32, &c.connections);
    if (const char *v = get("HIMENO_EMU_STATE_DIR")) c.state_dir = v;
    if (const char *v = get("HIMENO_EMU_LAUNCH_LOG")) c.launch_log = v;
    if (const char *v = get("HIMENO_EMU_HOST_ADDRESSABLE")) {
        if (!std::strcmp(v, "1")) {
            c.host_addressable = true;
        } else if (std::strcmp(v, "0")) {
            bad("HIMENO_EMU_HOST_ADDRESSABLE", v, "0 or 1");
        }
    }
    // CUDA_VISIBLE_DEVICES: a comma-separated list of indices; an index
    // out of range ends the list, as with the real driver.
    for (int i = 0; i < c.devices; ++i) c.visible.push_back(i);
    if (const char *v = std::getenv("CUDA_VISIBLE_DEVICES")) {
        std::vector<int> vis;
        std::stringstream ss(v);
        std::string item;
        while (std::getline(ss, item, ',')) {
            long long n;
            if (!number(item.c_str(), 0, c.devices - 1, &n)) break;
            vis.push_back(static_cast<int>(n));
        }
        c.visible = vis;
    }
    return c;
}

}  // namespace

const Config &config() {
    static const Config c = load();
    return c;
}

const std::string &config_error() {
    config();
    return g_error;
}

const char *describe() {
    static std::string text;
    static std::once_flag once;
    std::call_once(once, [] {
        const Config &c = config();
        std::ostringstream o;
        o << "himeno CUDA emulator: kernels.cu compiled for the host CPU, " << c.visible.size()
          << " device(s) of compute capability " << c.cc_major << "." << c.cc_minor
          << ", seed " << c.seed << ", ";
        if (c.workers > 0) {
            o << c.workers << " worker thread(s) per device";
        } else {
            o << "work runs when the host synchronises";
        }
        text = o.str();
    });
    return text.c_str();
}

void say(const char *fmt, ...) {
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    std::fprintf(stderr, "cuda-emu: %s\n", line);
}

uint64_t mix(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

}  // namespace emu

// himeno's kernel-argument protocol, read the way the real driver reads
// kernel parameters (each by its declared size) and checked as no real
// driver can: src/backend/gpu/launch.rs puts every argument in its own
// 8-byte slot, fills the unused half of a 4-byte value with a canary, and
// ends the parameter array with a pointer to ARGS_END. So a launch with
// too few or too many arguments, or an int where the kernel declares a
// long long (or the reverse), is refused with the parameter named.
#include "emu.h"

#include <cinttypes>
#include <cstring>

namespace emu {
namespace {

constexpr uint64_t ARGS_END = 0x48494D454E4F2E2Eull;
constexpr uint32_t CANARY = 0xA5A5A5A5u;

uint64_t slot(void **args, size_t i) {
    uint64_t v;
    std::memcpy(&v, args[i], 8);
    return v;
}

}  // namespace

bool check_count(void **args, size_t count, std::string *why) {
    if (!args) {
        *why = "no parameter array";
        return false;
    }
    for (size_t i = 0; i < count; ++i) {
        if (!args[i]) {
            *why = "parameter " + std::to_string(i) + " is a null entry of the parameter array";
            return false;
        }
        if (slot(args, i) == ARGS_END) {
            *why = std::to_string(i) + " arguments passed, " + std::to_string(count) + " declared";
            return false;
        }
    }
    if (!args[count] || slot(args, count) != ARGS_END) {
        *why = "more than the " + std::to_string(count) +
               " declared arguments passed (or no ARGS_END terminator: src/backend/gpu/launch.rs)";
        return false;
    }
    return true;
}

bool read_slot(void **args, size_t i, size_t count, unsigned size, uint64_t *out, std::string *why) {
    (void)count;
    uint64_t v = slot(args, i);
    uint32_t high = static_cast<uint32_t>(v >> 32);
    if (size == 8 && high == CANARY) {
        *why = "parameter " + std::to_string(i) +
               " is declared 8 bytes wide (a long long or a pointer) but was given a 4-byte value";
        return false;
    }
    if (size == 4 && high != CANARY) {
        *why = "parameter " + std::to_string(i) +
               " is declared 4 bytes wide (an int or a float) but was given an 8-byte value";
        return false;
    }
    if (size != 4 && size != 8) {
        *why = "parameter " + std::to_string(i) + " has an unsupported size of " + std::to_string(size);
        return false;
    }
    *out = size == 4 ? (v & 0xffffffffull) : v;
    return true;
}

}  // namespace emu

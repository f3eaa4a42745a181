// The real src/backend/gpu/kernels.cu, compiled for the host (shim.h is
// force-included before it), the emulator's own test kernels, and the
// table of their kernels with each one's parameter list deduced from its
// definition: what cuModuleGetFunction finds and cuLaunchKernel runs.
// EMU_KERNELS (from scripts/cuda-emu.sh) lists the kernels the two files
// define.
#include HIMENO_KERNELS_CU
#include "selftest_kernels.cu"

#include "emu.h"

#include <cinttypes>
#include <cstring>
#include <tuple>
#include <type_traits>
#include <utility>

namespace emu {
namespace {

template <auto F, class Sig = decltype(F)>
struct Entry;

template <auto F, class... A>
struct Entry<F, void (*)(A...)> {
    using Tuple = std::tuple<std::decay_t<A>...>;
    static constexpr size_t N = sizeof...(A);

    template <size_t I, class T>
    static bool one(void **args, Context *ctx, T &out, std::string *why) {
        uint64_t raw;
        if (!read_slot(args, I, N, sizeof(T), &raw, why)) return false;
        if constexpr (std::is_pointer_v<T>) {
            if (raw == 0) {
                out = nullptr;
                return true;
            }
            char *h = device_pointer(ctx, raw);
            if (!h) {
                char hex[32];
                std::snprintf(hex, sizeof hex, "0x%" PRIx64, raw);
                *why = "parameter " + std::to_string(I) + " is " + hex +
                       ", which lies in no live device allocation of this context";
                return false;
            }
            out = reinterpret_cast<T>(h);
        } else {
            std::memcpy(&out, &raw, sizeof(T));
        }
        return true;
    }

    template <size_t... I>
    static bool all(void **args, Context *ctx, Tuple &t, std::string *why, std::index_sequence<I...>) {
        return (one<I>(args, ctx, std::get<I>(t), why) && ...);
    }

    static bool decode(void **args, Context *ctx, std::shared_ptr<void> *out, std::string *why) {
        if (!check_count(args, N, why)) return false;
        auto t = std::make_shared<Tuple>();
        if (!all(args, ctx, *t, why, std::index_sequence_for<A...>{})) return false;
        *out = t;
        return true;
    }

    static void call(void *p) { std::apply(F, *static_cast<Tuple *>(p)); }

    static HostKernel make(const char *name) {
        return HostKernel{name, {Param{sizeof(A), std::is_pointer_v<std::decay_t<A>>}...}, &decode, &call};
    }
};

#define EMU_KERNEL(name) Entry<&name>::make(#name),
const std::vector<HostKernel> &table() {
    static const auto &t = *new std::vector<HostKernel>{EMU_KERNELS};
    return t;
}
#undef EMU_KERNEL

}  // namespace

const HostKernel *host_kernel(const std::string &name) {
    for (const HostKernel &k : table()) {
        if (name == k.name) return &k;
    }
    return nullptr;
}

}  // namespace emu

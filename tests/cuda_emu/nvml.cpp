// NVML's energy counter for the emulated devices: the four calls himeno's
// `--energy` makes (src/energy/nvml.rs), exported by the emulated driver
// itself, and found as libnvidia-ml.so.1 through a link to it that
// scripts/cuda-emu.sh makes (the dynamic loader maps one file once, so
// NVML and CUDA share the devices). Each device's counter advances by one
// microjoule per kernel thread it runs (driver.cpp): it advances with the
// work, deterministically, and it is no GPU's energy; himeno labels it
// emulated because this library exports himeno_emu_describe.
#include "emu.h"

#include <cstdio>
#include <cstring>

#define EXPORT extern "C" __attribute__((visibility("default")))

using namespace emu;

extern "C" CUresult cuInit(unsigned flags);

namespace {

// nvmlReturn_t values used here.
constexpr unsigned NVML_SUCCESS = 0;
constexpr unsigned NVML_ERROR_UNINITIALIZED = 1;
constexpr unsigned NVML_ERROR_INVALID_ARGUMENT = 2;
constexpr unsigned NVML_ERROR_NOT_FOUND = 6;

std::atomic<int> g_nvml_users{0};

// The UUID as NVML and nvidia-smi write it: GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx.
std::string uuid_text(const CUuuid &u) {
    char s[64];
    const unsigned char *b = reinterpret_cast<const unsigned char *>(u.bytes);
    std::snprintf(s, sizeof s,
                  "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
                  b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
    return s;
}

}  // namespace

EXPORT unsigned nvmlInit_v2(void) {
    // The devices are the driver's: NVML initialises it as a real NVML
    // starts on the kernel driver.
    if (cuInit(0) != OK) return NVML_ERROR_UNINITIALIZED;
    g_nvml_users.fetch_add(1);
    return NVML_SUCCESS;
}

EXPORT unsigned nvmlShutdown(void) {
    if (g_nvml_users.load() <= 0) return NVML_ERROR_UNINITIALIZED;
    g_nvml_users.fetch_sub(1);
    return NVML_SUCCESS;
}

EXPORT unsigned nvmlDeviceGetHandleByUUID(const char *uuid, void **device) {
    if (g_nvml_users.load() <= 0) return NVML_ERROR_UNINITIALIZED;
    if (!uuid || !device) return NVML_ERROR_INVALID_ARGUMENT;
    for (int i = 0; i < device_count(); ++i) {
        Device *d = emu::device(i);
        if (uuid_text(d->uuid) == uuid) {
            *device = d;
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_NOT_FOUND;
}

// Millijoules since the driver loaded, as NVML counts them.
EXPORT unsigned nvmlDeviceGetTotalEnergyConsumption(void *device, unsigned long long *mj) {
    if (g_nvml_users.load() <= 0) return NVML_ERROR_UNINITIALIZED;
    if (!device || !mj) return NVML_ERROR_INVALID_ARGUMENT;
    *mj = static_cast<Device *>(device)->energy_uj.load() / 1000;
    return NVML_SUCCESS;
}

// The CUDA driver API as the emulated driver exports it: the handful of
// types, result codes and attribute numbers that himeno's GPU path reaches
// through cudarc, with the values of NVIDIA's cuda.h (CUDA 12 and 13 agree
// on every one used here). Written out here so that the stand-in builds
// with nothing but a C++ compiler.
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" {

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct EmuContext *CUcontext;
typedef struct EmuStream *CUstream;
typedef struct EmuEvent *CUevent;
typedef struct EmuModule *CUmodule;
typedef struct EmuFunction *CUfunction;
typedef struct EmuPool *CUmemoryPool;
typedef struct {
    char bytes[16];
} CUuuid;

}  // extern "C"

namespace emu {

// Result codes (CUresult).
enum Result : CUresult {
    OK = 0,
    INVALID_VALUE = 1,
    OUT_OF_MEMORY = 2,
    NOT_INITIALIZED = 3,
    DEVICE_UNAVAILABLE = 46,
    NO_DEVICE = 100,
    INVALID_DEVICE = 101,
    INVALID_IMAGE = 200,
    INVALID_CONTEXT = 201,
    NO_BINARY_FOR_GPU = 209,
    INVALID_PTX = 218,
    UNSUPPORTED_PTX_VERSION = 222,
    INVALID_HANDLE = 400,
    NOT_FOUND = 500,
    NOT_READY = 600,
    PEER_ACCESS_ALREADY_ENABLED = 704,
    ILLEGAL_ADDRESS = 700,
    LAUNCH_OUT_OF_RESOURCES = 701,
    LAUNCH_FAILED = 719,
    NOT_SUPPORTED = 801,
    UNKNOWN = 999,
};

// Device attributes (CUdevice_attribute) the emulated devices answer.
enum Attribute : int {
    MAX_THREADS_PER_BLOCK = 1,
    MAX_BLOCK_DIM_X = 2,
    MAX_BLOCK_DIM_Y = 3,
    MAX_BLOCK_DIM_Z = 4,
    MAX_GRID_DIM_X = 5,
    MAX_GRID_DIM_Y = 6,
    MAX_GRID_DIM_Z = 7,
    MAX_SHARED_MEMORY_PER_BLOCK = 8,
    TOTAL_CONSTANT_MEMORY = 9,
    WARP_SIZE = 10,
    MAX_REGISTERS_PER_BLOCK = 12,
    CLOCK_RATE = 13,
    MULTIPROCESSOR_COUNT = 16,
    COMPUTE_MODE = 20,
    CONCURRENT_KERNELS = 31,
    PCI_BUS_ID = 33,
    PCI_DEVICE_ID = 34,
    MEMORY_CLOCK_RATE = 36,
    GLOBAL_MEMORY_BUS_WIDTH = 37,
    L2_CACHE_SIZE = 38,
    MAX_THREADS_PER_MULTIPROCESSOR = 39,
    ASYNC_ENGINE_COUNT = 40,
    UNIFIED_ADDRESSING = 41,
    PCI_DOMAIN_ID = 50,
    COMPUTE_CAPABILITY_MAJOR = 75,
    COMPUTE_CAPABILITY_MINOR = 76,
    MAX_SHARED_MEMORY_PER_MULTIPROCESSOR = 81,
    MAX_REGISTERS_PER_MULTIPROCESSOR = 82,
    MEMORY_POOLS_SUPPORTED = 115,
};

// Compute modes (CU_COMPUTEMODE_*).
enum ComputeMode : int { MODE_DEFAULT = 0, MODE_PROHIBITED = 2, MODE_EXCLUSIVE_PROCESS = 3 };

// Flags.
constexpr unsigned EVENT_DISABLE_TIMING = 0x2;
constexpr int FUNC_MAX_THREADS_PER_BLOCK = 0;  // CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK
constexpr int FUNC_SHARED_SIZE_BYTES = 1;
constexpr int FUNC_NUM_REGS = 4;

}  // namespace emu

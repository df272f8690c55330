#include <dlfcn.h>

#include "gpu_libraries.hpp"

namespace ddprun::proto::detail {
namespace {

// The driver API entry points used, with the driver's C signatures (CUresult
// is an int-sized enum, 0 is CUDA_SUCCESS; CUdevice is an int).
using CuInit = int (*)(unsigned flags);
using CuDeviceGetCount = int (*)(int* count);
using CuDeviceGet = int (*)(int* device, int ordinal);
using CuDeviceGetPciBusId = int (*)(char* bus_id, int length, int device);
using CuGetErrorName = int (*)(int error, const char** name);

// "CUDA error 999 (CUDA_ERROR_UNKNOWN)", the name as the driver gives it.
std::string describe(void* driver, int error) {
  const auto get_name = reinterpret_cast<CuGetErrorName>(dlsym(driver, "cuGetErrorName"));
  const char* name = nullptr;
  const bool named = get_name != nullptr && get_name(error, &name) == 0 && name != nullptr;
  return "CUDA error " + std::to_string(error) + (named ? " (" + std::string(name) + ")" : "");
}

// Each GPU's PCI bus id, empty where the driver gives none.
std::vector<std::string> busIds(void* driver, int count) {
  auto get_device = reinterpret_cast<CuDeviceGet>(dlsym(driver, "cuDeviceGet"));
  auto get_bus_id = reinterpret_cast<CuDeviceGetPciBusId>(dlsym(driver, "cuDeviceGetPCIBusId"));
  std::vector<std::string> ids;
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    int device = 0;
    char bus_id[64] = {};
    const bool named = get_device != nullptr && get_bus_id != nullptr &&
                       get_device(&device, ordinal) == 0 &&
                       get_bus_id(bus_id, static_cast<int>(sizeof(bus_id)), device) == 0;
    ids.emplace_back(named ? bus_id : "");
  }
  return ids;
}

}  // namespace

VisibleGpus askCudaDriver() {
  VisibleGpus gpus;
  gpus.counted_by = "the CUDA driver";
  // Never closed: once cuInit has run, the driver's own threads run its code.
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (driver == nullptr) {
    gpus.counted_by = "none";  // nothing that could count is installed
    gpus.why_none = "the CUDA driver (libcuda.so.1) is not installed";
    return gpus;
  }
  auto init = reinterpret_cast<CuInit>(dlsym(driver, "cuInit"));
  auto get_count = reinterpret_cast<CuDeviceGetCount>(dlsym(driver, "cuDeviceGetCount"));
  if (init == nullptr || get_count == nullptr) {
    gpus.counted_by = "none";
    gpus.why_none = "libcuda.so.1 lacks cuInit/cuDeviceGetCount";
  } else if (const int error = init(0); error != 0) {
    // 100 is CUDA_ERROR_NO_DEVICE: a driver, but nothing visible.
    gpus.why_none = "cuInit failed with " + describe(driver, error) +
                    (error == 100 ? ": no device visible; check CUDA_VISIBLE_DEVICES" : "");
  } else if (const int count_error = get_count(&gpus.count); count_error != 0) {
    gpus.count = 0;
    gpus.why_none = "cuDeviceGetCount failed with " + describe(driver, count_error);
  } else if (gpus.count == 0) {
    gpus.why_none = "the CUDA driver reports no device";
  } else {
    gpus.bus_ids = busIds(driver, gpus.count);
  }
  return gpus;
}

}  // namespace ddprun::proto::detail

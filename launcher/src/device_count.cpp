#include "ddprun/launcher/device_count.hpp"

#include <dlfcn.h>

namespace ddprun::launcher {
namespace {

// The two driver API entry points used, with the driver's C signatures
// (CUresult is an int-sized enum; 0 is CUDA_SUCCESS).
using CuInit = int (*)(unsigned int flags);
using CuDeviceGetCount = int (*)(int* count);

}  // namespace

GpuCount countVisibleGpus() {
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (driver == nullptr) {
    return {0, "the CUDA driver (libcuda.so.1) is not installed"};
  }
  auto init = reinterpret_cast<CuInit>(dlsym(driver, "cuInit"));
  auto get_count = reinterpret_cast<CuDeviceGetCount>(dlsym(driver, "cuDeviceGetCount"));
  GpuCount result;
  if (init == nullptr || get_count == nullptr) {
    result.why_none = "libcuda.so.1 lacks cuInit/cuDeviceGetCount";
  } else if (const int error = init(0); error != 0) {
    // 100 is CUDA_ERROR_NO_DEVICE: a driver, but nothing visible.
    result.why_none = "cuInit failed with CUDA error " + std::to_string(error) +
                      (error == 100 ? " (no device visible; check CUDA_VISIBLE_DEVICES)" : "");
  } else if (const int error_count = get_count(&result.count); error_count != 0) {
    result.count = 0;
    result.why_none = "cuDeviceGetCount failed with CUDA error " + std::to_string(error_count);
  } else if (result.count == 0) {
    result.why_none = "the CUDA driver reports no device";
  }
  dlclose(driver);
  return result;
}

}  // namespace ddprun::launcher

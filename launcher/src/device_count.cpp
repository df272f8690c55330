#include "ddprun/launcher/device_count.hpp"

#include <dlfcn.h>

namespace ddprun::launcher {
namespace {

// The driver API entry points used, with the driver's C signatures (CUresult
// is an int-sized enum, 0 is CUDA_SUCCESS; CUdevice is an int).
using CuInit = int (*)(unsigned int flags);
using CuDeviceGetCount = int (*)(int* count);
using CuDeviceGet = int (*)(int* device, int ordinal);
using CuDeviceGetPciBusId = int (*)(char* bus_id, int length, int device);

struct VisibleGpus {
  GpuCount count;
  std::vector<std::string> bus_ids;
};

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

VisibleGpus askTheDriver() {
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (driver == nullptr) {
    return {{0, "the CUDA driver (libcuda.so.1) is not installed"}, {}};
  }
  auto init = reinterpret_cast<CuInit>(dlsym(driver, "cuInit"));
  auto get_count = reinterpret_cast<CuDeviceGetCount>(dlsym(driver, "cuDeviceGetCount"));
  VisibleGpus result;
  GpuCount& gpus = result.count;
  if (init == nullptr || get_count == nullptr) {
    gpus.why_none = "libcuda.so.1 lacks cuInit/cuDeviceGetCount";
  } else if (const int error = init(0); error != 0) {
    // 100 is CUDA_ERROR_NO_DEVICE: a driver, but nothing visible.
    gpus.why_none = "cuInit failed with CUDA error " + std::to_string(error) +
                    (error == 100 ? " (no device visible; check CUDA_VISIBLE_DEVICES)" : "");
  } else if (const int error_count = get_count(&gpus.count); error_count != 0) {
    gpus.count = 0;
    gpus.why_none = "cuDeviceGetCount failed with CUDA error " + std::to_string(error_count);
  } else if (gpus.count == 0) {
    gpus.why_none = "the CUDA driver reports no device";
  } else {
    result.bus_ids = busIds(driver, gpus.count);
  }
  dlclose(driver);
  return result;
}

// cuInit can take a second on a machine with GPUs: asked once per process,
// whether --nproc-per-node gpu, --numa-binding or both want to know.
const VisibleGpus& visibleGpus() {
  static const VisibleGpus gpus = askTheDriver();
  return gpus;
}

}  // namespace

GpuCount countVisibleGpus() { return visibleGpus().count; }

std::vector<std::string> visibleGpuPciBusIds() { return visibleGpus().bus_ids; }

}  // namespace ddprun::launcher

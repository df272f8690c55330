#include "ddprun/launcher/gpu_locality.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>

#include "ddprun/proto/errors.hpp"

namespace ddprun::launcher {
namespace {

// The driver API entry points used, with the driver's C signatures (CUresult
// is an int-sized enum, 0 is CUDA_SUCCESS; CUdevice is an int).
using CuInit = int (*)(unsigned int flags);
using CuDeviceGetCount = int (*)(int* count);
using CuDeviceGet = int (*)(int* device, int ordinal);
using CuDeviceGetPciBusId = int (*)(char* bus_id, int length, int device);

// "0000:3B:00.0" or "00000000:3b:00.0" as sysfs names the device:
// "0000:3b:00.0". Empty when it is no PCI address.
std::string sysfsSpelling(std::string_view bus_id) {
  unsigned domain = 0;
  unsigned bus = 0;
  unsigned device = 0;
  unsigned function = 0;
  const std::string text(bus_id);
  if (std::sscanf(text.c_str(), "%x:%x:%x.%x", &domain, &bus, &device, &function) != 4) {
    return {};
  }
  char name[32];
  std::snprintf(name, sizeof(name), "%04x:%02x:%02x.%x", domain, bus, device, function);
  return name;
}

}  // namespace

std::vector<std::string> visibleGpuBusIds() {
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (driver == nullptr) {
    return {};
  }
  auto init = reinterpret_cast<CuInit>(dlsym(driver, "cuInit"));
  auto get_count = reinterpret_cast<CuDeviceGetCount>(dlsym(driver, "cuDeviceGetCount"));
  auto get_device = reinterpret_cast<CuDeviceGet>(dlsym(driver, "cuDeviceGet"));
  auto get_bus_id = reinterpret_cast<CuDeviceGetPciBusId>(dlsym(driver, "cuDeviceGetPCIBusId"));
  std::vector<std::string> bus_ids;
  int count = 0;
  int failed_ordinal = -1;
  if (init != nullptr && get_count != nullptr && get_device != nullptr && get_bus_id != nullptr &&
      init(0) == 0 && get_count(&count) == 0) {
    for (int ordinal = 0; ordinal < count && failed_ordinal < 0; ++ordinal) {
      int device = 0;
      char bus_id[64] = {};
      if (get_device(&device, ordinal) != 0 ||
          get_bus_id(bus_id, static_cast<int>(sizeof(bus_id)), device) != 0) {
        failed_ordinal = ordinal;
      }
      bus_ids.emplace_back(bus_id);
    }
  }
  dlclose(driver);
  if (failed_ordinal >= 0) {
    // GPUs that cannot be placed: binding as if there were none would be wrong.
    throw ConfigError("--numa-binding: the CUDA driver cannot give GPU " +
                      std::to_string(failed_ordinal) + "'s PCI bus id");
  }
  return bus_ids;
}

int numaNodeOfPciDevice(std::string_view bus_id, const std::filesystem::path& pci_devices) {
  const std::string name = sysfsSpelling(bus_id);
  if (name.empty()) {
    throw ConfigError("--numa-binding: '" + std::string(bus_id) + "' is not a PCI bus id");
  }
  const std::filesystem::path file = pci_devices / name / "numa_node";
  std::ifstream in(file);
  int node = 0;
  if (!(in >> node)) {
    throw ConfigError("--numa-binding: cannot read the NUMA node of the GPU at " + name + " from " +
                      file.string());
  }
  return std::max(node, 0);
}

}  // namespace ddprun::launcher

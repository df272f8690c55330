#include "ddprun/launcher/host/gpu_locality.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>

#include "ddprun/launcher/host/device_count.hpp"
#include "ddprun/proto/errors.hpp"

namespace ddprun::launcher {
namespace {

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
  std::vector<std::string> bus_ids = visibleGpuPciBusIds();
  const auto unnamed = std::find(bus_ids.begin(), bus_ids.end(), std::string());
  if (unnamed != bus_ids.end()) {
    // GPUs that cannot be placed: binding as if there were none would be wrong.
    throw ConfigError("--numa-binding: neither NVML nor the CUDA driver gives GPU " +
                      std::to_string(unnamed - bus_ids.begin()) + "'s PCI bus id");
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

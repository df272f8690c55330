// Where the CUDA GPUs the workers will see sit, for --numa-binding: each
// one's PCI address, from NVML or the CUDA driver as device_count.hpp counts
// them (in a child; CUDA_VISIBLE_DEVICES applies), and the NUMA node Linux
// gives that PCI device in sysfs, the file torchrun reads. Stateless; any
// thread.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace ddprun::launcher {

// The PCI bus ids of the visible CUDA GPUs in CUDA's order (GPU i is local
// rank i's), as NVML or the driver writes them ("00000000:3B:00.0",
// "0000:3B:00.0"); empty when no GPU is visible. Throws ConfigError when a
// GPU is counted whose address neither library gives.
std::vector<std::string> visibleGpuBusIds();

// The NUMA node of the PCI device `bus_id`: <pci_devices>/<bus id in
// sysfs' spelling>/numa_node. -1 (no NUMA information, as on one-node
// machines) is node 0, as torchrun reads it. Throws ConfigError, naming the
// device and the file, when it cannot be read.
int numaNodeOfPciDevice(std::string_view bus_id,
                        const std::filesystem::path& pci_devices = "/sys/bus/pci/devices");

}  // namespace ddprun::launcher

// A fake libcuda.so.1 (see fake_gpu_machine.hpp): the driver calls ddprun
// and LibTorch's device count make. Like the real driver, cuInit applies
// CUDA_VISIBLE_DEVICES: a comma-separated list of ordinals or of GPU UUIDs
// ("GPU-" and a unique prefix); the first entry that names no device hides
// it and every entry after it; a device named twice hides them all; with
// none visible cuInit fails with CUDA_ERROR_NO_DEVICE. Ordinals count the
// fastest model first (FAKE_GPU_FAST) unless CUDA_DEVICE_ORDER=PCI_BUS_ID.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "fake_gpu_machine.hpp"

namespace {

constexpr int kSuccess = 0;
constexpr int kInvalidValue = 1;
constexpr int kNotInitialized = 3;
constexpr int kNoDevice = 100;
constexpr int kInvalidDevice = 101;

bool started = false;
std::vector<int> visible;  // CUDA ordinal -> physical index

// Physical indices in CUDA's enumeration order.
std::vector<int> enumerationOrder() {
  std::vector<int> order;
  const int fast = fake_gpu::setting("FAST", -1);
  const char* by = std::getenv("CUDA_DEVICE_ORDER");
  const bool pci_order = by != nullptr && std::strcmp(by, "PCI_BUS_ID") == 0;
  if (!pci_order && fast >= 0 && fast < fake_gpu::physicalCount()) {
    order.push_back(fast);
  }
  for (int index = 0; index < fake_gpu::physicalCount(); ++index) {
    if (order.empty() || order.front() != index) {
      order.push_back(index);
    }
  }
  return order;
}

// The physical index `entry` names; -1 when it names none.
int deviceNamedBy(const std::string& entry) {
  const int physical = fake_gpu::physicalCount();
  if (entry.rfind("GPU-", 0) == 0) {
    int found = -1;
    for (int index = 0; index < physical; ++index) {
      if (fake_gpu::uuidOf(index).rfind(entry, 0) == 0) {
        if (found != -1) {
          return -1;  // ambiguous
        }
        found = index;
      }
    }
    return found;
  }
  if (entry.empty() || !std::isdigit(static_cast<unsigned char>(entry[0]))) {
    return -1;
  }
  const long ordinal = std::strtol(entry.c_str(), nullptr, 10);
  return ordinal < physical ? enumerationOrder()[static_cast<std::size_t>(ordinal)] : -1;
}

std::vector<int> visibleDevices() {
  std::vector<int> devices;
  const char* list = std::getenv("CUDA_VISIBLE_DEVICES");
  if (list == nullptr) {
    return enumerationOrder();
  }
  std::stringstream entries(list);
  for (std::string entry; std::getline(entries, entry, ',');) {
    const int index = deviceNamedBy(entry);
    if (index < 0) {
      break;
    }
    if (std::find(devices.begin(), devices.end(), index) != devices.end()) {
      return {};
    }
    devices.push_back(index);
  }
  return devices;
}

}  // namespace

extern "C" {

int cuInit(unsigned flags) {
  if (flags != 0) {
    return kInvalidValue;
  }
  if (const int error = fake_gpu::setting("CUINIT_ERROR", 0); error != 0) {
    return error;
  }
  visible = visibleDevices();
  if (visible.empty()) {
    return kNoDevice;
  }
  fake_gpu::startLikeADriver("cuInit");
  started = true;
  return kSuccess;
}

int cuGetErrorName(int error, const char** name) {
  switch (error) {
    case kSuccess:
      *name = "CUDA_SUCCESS";
      return kSuccess;
    case kInvalidValue:
      *name = "CUDA_ERROR_INVALID_VALUE";
      return kSuccess;
    case kNotInitialized:
      *name = "CUDA_ERROR_NOT_INITIALIZED";
      return kSuccess;
    case kNoDevice:
      *name = "CUDA_ERROR_NO_DEVICE";
      return kSuccess;
    case kInvalidDevice:
      *name = "CUDA_ERROR_INVALID_DEVICE";
      return kSuccess;
    case 999:
      *name = "CUDA_ERROR_UNKNOWN";
      return kSuccess;
    default:
      return kInvalidValue;
  }
}

int cuDeviceGetCount(int* count) {
  if (!started) {
    return kNotInitialized;
  }
  *count = static_cast<int>(visible.size());
  return kSuccess;
}

int cuDeviceGet(int* device, int ordinal) {
  if (!started) {
    return kNotInitialized;
  }
  if (ordinal < 0 || ordinal >= static_cast<int>(visible.size())) {
    return kInvalidDevice;
  }
  *device = ordinal;
  return kSuccess;
}

int cuDeviceGetPCIBusId(char* bus_id, int length, int device) {
  if (!started) {
    return kNotInitialized;
  }
  if (device < 0 || device >= static_cast<int>(visible.size())) {
    return kInvalidDevice;
  }
  const unsigned bus = fake_gpu::busOf(visible[static_cast<std::size_t>(device)]);
  std::snprintf(bus_id, static_cast<std::size_t>(length), "0000:%02X:00.0", bus);
  return kSuccess;
}

}  // extern "C"

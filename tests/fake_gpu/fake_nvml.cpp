// A fake libnvidia-ml.so.1 (see fake_gpu_machine.hpp): NVML's calls that
// ddprun and PyTorch make, over every physical device. Like the real one it
// ignores CUDA_VISIBLE_DEVICES.
#include <cstdio>
#include <cstring>

#include "fake_gpu_machine.hpp"

namespace {

constexpr int kSuccess = 0;
constexpr int kUninitialized = 1;
constexpr int kInvalidArgument = 2;
constexpr int kInsufficientSize = 7;

bool started = false;
int devices[64];  // a handle points at its index

struct PciInfo {  // nvmlPciInfo_t
  char bus_id_legacy[16];
  unsigned domain;
  unsigned bus;
  unsigned device;
  unsigned pci_device_id;
  unsigned pci_subsystem_id;
  char bus_id[32];
};

int indexOf(void* handle) {
  const auto* slot = static_cast<int*>(handle);
  return slot >= devices && slot < devices + fake_gpu::physicalCount() ? *slot : -1;
}

// A device's text (UUID, name) into the caller's buffer, as NVML does.
int copyOut(void* handle, std::string (*text_of)(int), char* buffer, unsigned length) {
  const int index = indexOf(handle);
  if (index < 0) {
    return kInvalidArgument;
  }
  const std::string text = text_of(index);
  if (text.size() + 1 > length) {
    return kInsufficientSize;
  }
  std::memcpy(buffer, text.c_str(), text.size() + 1);
  return kSuccess;
}

}  // namespace

extern "C" {

int nvmlInit_v2() {
  if (const int error = fake_gpu::setting("NVML_ERROR", 0); error != 0) {
    return error;
  }
  fake_gpu::startLikeADriver("nvmlInit_v2");
  started = true;
  return kSuccess;
}

int nvmlShutdown() {
  started = false;
  return kSuccess;
}

const char* nvmlErrorString(int error) {
  switch (error) {
    case kSuccess:
      return "Success";
    case kUninitialized:
      return "Uninitialized";
    case 9:
      return "Driver Not Loaded";
    case 12:
      return "NVML Shared Library Not Found";
    default:
      return "Unknown Error";
  }
}

int nvmlDeviceGetCount_v2(unsigned* count) {
  if (!started) {
    return kUninitialized;
  }
  *count = static_cast<unsigned>(fake_gpu::physicalCount());
  return kSuccess;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned index, void** handle) {
  if (!started) {
    return kUninitialized;
  }
  if (static_cast<int>(index) >= fake_gpu::physicalCount() || index >= 64) {
    return kInvalidArgument;
  }
  devices[index] = static_cast<int>(index);
  *handle = &devices[index];
  return kSuccess;
}

int nvmlDeviceGetUUID(void* handle, char* uuid, unsigned length) {
  return copyOut(handle, fake_gpu::uuidOf, uuid, length);
}

int nvmlDeviceGetName(void* handle, char* name, unsigned length) {
  return copyOut(handle, fake_gpu::nameOf, name, length);
}

int nvmlDeviceGetPciInfo_v3(void* handle, PciInfo* pci) {
  const int index = indexOf(handle);
  if (index < 0) {
    return kInvalidArgument;
  }
  std::memset(pci, 0, sizeof(*pci));
  pci->bus = fake_gpu::busOf(index);
  std::snprintf(pci->bus_id, sizeof(pci->bus_id), "00000000:%02X:00.0", pci->bus);
  std::snprintf(pci->bus_id_legacy, sizeof(pci->bus_id_legacy), "0000:%02X:00.0", pci->bus);
  return kSuccess;
}

}  // extern "C"

#include <dlfcn.h>

#include <array>

#include "gpu_libraries.hpp"

namespace ddprun::proto::detail {
namespace {

// NVML's C ABI as far as it is used (nvml.h is not packaged for Debian's
// main archive): nvmlReturn_t is an int-sized enum, 0 is NVML_SUCCESS.
using NvmlDevice = void*;
struct NvmlPciInfo {  // nvmlPciInfo_t; NVML writes all of it
  char bus_id_legacy[16];
  unsigned domain;
  unsigned bus;
  unsigned device;
  unsigned pci_device_id;
  unsigned pci_subsystem_id;
  char bus_id[32];
};
using Init = int (*)();
using Shutdown = int (*)();
using ErrorString = const char* (*)(int);
using GetCount = int (*)(unsigned* count);
using GetHandle = int (*)(unsigned index, NvmlDevice* device);
using GetUuid = int (*)(NvmlDevice device, char* uuid, unsigned length);
using GetPciInfo = int (*)(NvmlDevice device, NvmlPciInfo* pci);
using GetName = int (*)(NvmlDevice device, char* name, unsigned length);

template <typename Function>
Function entry(void* library, const char* name) {
  return reinterpret_cast<Function>(dlsym(library, name));
}

std::string describe(void* library, const char* call, int error) {
  const auto error_string = entry<ErrorString>(library, "nvmlErrorString");
  const char* text = error_string != nullptr ? error_string(error) : nullptr;
  return "NVML: " + std::string(call) + " failed with error " + std::to_string(error) +
         (text != nullptr ? " (" + std::string(text) + ")" : "");
}

// One device's UUID and bus id; false (and `why` set) when NVML fails.
bool readDevice(void* library, unsigned index, NvmlDevices& devices, std::string& why) {
  NvmlDevice device = nullptr;
  if (const int error = entry<GetHandle>(library, "nvmlDeviceGetHandleByIndex_v2")(index, &device);
      error != 0) {
    why = describe(library, "nvmlDeviceGetHandleByIndex_v2", error);
    return false;
  }
  std::array<char, 96> uuid{};  // NVML_DEVICE_UUID_V2_BUFFER_SIZE
  if (const int error = entry<GetUuid>(library, "nvmlDeviceGetUUID")(
          device, uuid.data(), static_cast<unsigned>(uuid.size()));
      error != 0) {
    why = describe(library, "nvmlDeviceGetUUID", error);
    return false;
  }
  uuid.back() = '\0';
  devices.uuids.emplace_back(uuid.data());
  NvmlPciInfo pci{};
  const auto get_pci = entry<GetPciInfo>(library, "nvmlDeviceGetPciInfo_v3");
  const bool named = get_pci != nullptr && get_pci(device, &pci) == 0;
  pci.bus_id[sizeof(pci.bus_id) - 1] = '\0';
  devices.bus_ids.emplace_back(named ? pci.bus_id : "");
  std::array<char, 96> name{};  // NVML_DEVICE_NAME_V2_BUFFER_SIZE
  const auto get_name = entry<GetName>(library, "nvmlDeviceGetName");
  const bool has_name =
      get_name != nullptr && get_name(device, name.data(), static_cast<unsigned>(name.size())) == 0;
  name.back() = '\0';
  devices.names.emplace_back(has_name ? name.data() : "");
  return true;
}

NvmlAnswer listDevices(void* library) {
  unsigned count = 0;
  if (const int error = entry<GetCount>(library, "nvmlDeviceGetCount_v2")(&count); error != 0) {
    return {std::nullopt, describe(library, "nvmlDeviceGetCount_v2", error)};
  }
  NvmlDevices devices;
  std::string why;
  for (unsigned index = 0; index < count; ++index) {
    if (!readDevice(library, index, devices, why)) {
      return {std::nullopt, why};
    }
  }
  return {std::move(devices), {}};
}

}  // namespace

NvmlAnswer askNvml() {
  // Never closed: once nvmlInit has run, threads it started may run its code.
  void* nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (nvml == nullptr) {
    return {std::nullopt, "NVML: libnvidia-ml.so.1 is not installed"};
  }
  for (const char* name : {"nvmlInit_v2", "nvmlShutdown", "nvmlDeviceGetCount_v2",
                           "nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetUUID"}) {
    if (dlsym(nvml, name) == nullptr) {
      return {std::nullopt, "NVML: libnvidia-ml.so.1 lacks " + std::string(name)};
    }
  }
  if (const int error = entry<Init>(nvml, "nvmlInit_v2")(); error != 0) {
    return {std::nullopt, describe(nvml, "nvmlInit_v2", error)};
  }
  NvmlAnswer answer = listDevices(nvml);
  entry<Shutdown>(nvml, "nvmlShutdown")();
  return answer;
}

}  // namespace ddprun::proto::detail

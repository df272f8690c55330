// What the two GPU libraries say, each asked through dlopen in the calling
// process: NVML (libnvidia-ml.so.1), which sees every device and ignores
// CUDA_VISIBLE_DEVICES, and the CUDA driver (libcuda.so.1), which applies
// it. Used only by visible_gpus.cpp.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ddprun/proto/visible_gpus.hpp"

namespace ddprun::proto::detail {

// Every physical device NVML reports, in its index order.
struct NvmlDevices {
  std::vector<std::string> uuids;    // "GPU-8c0d…"
  std::vector<std::string> bus_ids;  // "00000000:3B:00.0"; "" where NVML gives none
  std::vector<std::string> names;    // "NVIDIA H100 80GB HBM3"; "" where NVML gives none
};

struct NvmlAnswer {
  std::optional<NvmlDevices> devices;  // nullopt: NVML cannot answer
  std::string why_not;                 // then: "NVML: libnvidia-ml.so.1 is not installed"
};

NvmlAnswer askNvml();

// The devices the CUDA driver makes visible under this process's
// CUDA_VISIBLE_DEVICES; counted_by is "the CUDA driver".
VisibleGpus askCudaDriver();

}  // namespace ddprun::proto::detail

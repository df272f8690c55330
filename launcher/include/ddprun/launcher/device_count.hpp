// Counts the CUDA GPUs a worker would see, without linking CUDA: the driver
// library (libcuda.so.1) is loaded with dlopen, and its own device count
// honours CUDA_VISIBLE_DEVICES exactly as the workers' CUDA will.
// Stateless; safe from any thread.
#pragma once

#include <string>

namespace ddprun::launcher {

struct GpuCount {
  int count = 0;
  std::string why_none;  // when count is 0: e.g. "libcuda.so.1 is not installed"
};

GpuCount countVisibleGpus();

}  // namespace ddprun::launcher

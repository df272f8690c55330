// Counts the CUDA GPUs a worker would see, without linking CUDA: the driver
// library (libcuda.so.1) is loaded with dlopen, and its own device count
// honours CUDA_VISIBLE_DEVICES exactly as the workers' CUDA will.
// The driver is asked once per process; safe from any thread.
#pragma once

#include <string>
#include <vector>

namespace ddprun::launcher {

struct GpuCount {
  int count = 0;
  std::string why_none;  // when count is 0: e.g. "libcuda.so.1 is not installed"
};

GpuCount countVisibleGpus();

// Each visible GPU's PCI bus id as the driver spells it, in CUDA ordinal
// order; empty for a GPU the driver gives none. Empty when none is visible.
std::vector<std::string> visibleGpuPciBusIds();

}  // namespace ddprun::launcher

// Counts the CUDA GPUs a worker would see, as PyTorch does (NVML, then the
// CUDA driver; ddprun/proto/visible_gpus.hpp), in a short-lived child:
// `<this ddprun> devices --json` (with --count-only for the count). Neither library is ever loaded
// into the agent, so counting leaves no driver threads, CUDA state or memory in a process that
// lives as long as the job. Must run in the ddprun executable (the child is /proc/self/exe); tests
// ask proto::probeVisibleGpus instead. Each is asked once per process; safe from any thread.
#pragma once

#include <string>
#include <vector>

#include "ddprun/proto/visible_gpus.hpp"

namespace ddprun::launcher {

// count, counted_by ("NVML", "the CUDA driver"), why_none when count is 0,
// and each GPU's PCI bus id in CUDA ordinal order ("" where only the
// driver could say, on a node with two GPU models: see visibleGpuPciBusIds).
using GpuCount = proto::VisibleGpus;

GpuCount countVisibleGpus();
// Counted again, not the first answer: whether GPUs were lost since (a
// health check before a node rejoins).
GpuCount countVisibleGpusNow();

// Each visible GPU's PCI bus id as the library spells it, in CUDA ordinal
// order, asking the driver where NVML's order is not CUDA's; empty for a GPU
// neither gives. Empty when none is visible.
std::vector<std::string> visibleGpuPciBusIds();

}  // namespace ddprun::launcher

#include "ddprun/worker/training_device.hpp"

#include <cstdlib>
#include <ostream>

#include "ddprun/proto/errors.hpp"

namespace ddprun::worker {
namespace {

TrainingDevice onGpu(const std::string& backend, int local_rank) {
  const int gpus = cuda_support::deviceCount();
  if (local_rank >= gpus) {
    throw ConfigError("--backend " + backend + ": LOCAL_RANK " + std::to_string(local_rank) +
                      " needs GPU " + std::to_string(local_rank) + ", but LibTorch sees " +
                      std::to_string(gpus) + " (CUDA_VISIBLE_DEVICES, or more workers than GPUs?)");
  }
  cuda_support::useDevice(local_rank);
  return {torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(local_rank)), "nccl"};
}

// The CPU with Gloo, where this train has Gloo. `why` says what led here.
TrainingDevice onCpu(const std::string& why) {
  if (!gloo_support::compiledIn()) {
    throw ConfigError(why +
                      ": this train was built against a LibTorch without Gloo's headers "
                      "(a PyTorch wheel's), so it trains on GPUs with NCCL only");
  }
  return {};
}

}  // namespace

TrainingDevice chooseTrainingDevice(const std::string& backend, int local_rank) {
  if (backend == "gloo") {
    return onCpu("--backend gloo");
  }
  const bool has_cuda = cuda_support::compiledIn();
  if (backend == "nccl") {
    if (!has_cuda) {
      throw ConfigError(
          "--backend nccl: this train was built against a CPU-only LibTorch (Gloo only)");
    }
    return onGpu(backend, local_rank);
  }
  return has_cuda && cuda_support::deviceCount() > 0
             ? onGpu(backend, local_rank)
             : onCpu("--backend auto found no GPU (CUDA_VISIBLE_DEVICES?)");
}

std::optional<std::string> unusedGpusNotice(const proto::VisibleGpus& visible,
                                            bool libtorch_has_cuda) {
  if (libtorch_has_cuda || visible.count == 0) {
    return std::nullopt;
  }
  return "train: " + std::to_string(visible.count) + " GPU" +
         (visible.count == 1 ? " is" : "s are") + " visible (counted by " + visible.counted_by +
         "), but this train was built against a LibTorch without CUDA: training on the CPU "
         "with Gloo";
}

void noteUnusedGpus(const std::string& backend, int rank, std::ostream& out) {
  if (backend != "auto" || rank != 0 || cuda_support::compiledIn()) {
    return;  // the user chose, rank 0 says it for the job, or the GPUs are used
  }
  // NVML only: a hung or failing driver must not stop a job that never
  // needed it (NVML's init opens no CUDA context).
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  const auto notice = unusedGpusNotice(
      proto::probeVisibleGpus(visible ? std::optional<std::string>(visible) : std::nullopt,
                              proto::GpuLibraries::kNvmlOnly),
      false);
  if (notice) {
    out << *notice << std::endl;
  }
}

}  // namespace ddprun::worker

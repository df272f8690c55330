#include "ddprun/worker/data_parallel.hpp"

#include <torch/csrc/distributed/c10d/comm.hpp>

#include "ddprun/worker/c10d_compat.hpp"

namespace ddprun::worker {
namespace {

// DDP's defaults: a small first bucket so the last layers' gradients (ready
// first) go out early, then 25 MiB buckets; 250 MiB broadcast buffers.
constexpr int64_t kFirstBucketBytes = c10d::kDefaultFirstBucketBytes;
constexpr int64_t kBucketBytesCap = c10d::kDefaultBucketBytesCap;
constexpr size_t kBroadcastBucketBytes = size_t{250} * 1024 * 1024;

}  // namespace

DataParallel::DataParallel(torch::nn::Module& module, c10::intrusive_ptr<c10d::ProcessGroup> group)
    : module_(module), group_(std::move(group)) {
  std::vector<at::Tensor> parameters = module_.parameters();
  std::vector<bool> expect_sparse(parameters.size(), false);
  auto [bucket_indices, bucket_limits] = c10d::compute_bucket_assignment_by_size(
      parameters, {static_cast<size_t>(kFirstBucketBytes), static_cast<size_t>(kBucketBytesCap)},
      expect_sparse);
  // Buckets in reverse order approximate the order backward produces
  // gradients in, as Python's DDP does.
  std::reverse(bucket_indices.begin(), bucket_indices.end());
  std::reverse(bucket_limits.begin(), bucket_limits.end());
  std::unordered_map<size_t, std::string> names;
  size_t index = 0;
  for (const auto& item : module_.named_parameters()) {
    names[index++] = item.key();
  }
  reducer_ = c10d_compat::makeReducer({std::move(parameters), std::move(bucket_indices),
                                       std::move(bucket_limits), group_, std::move(expect_sparse),
                                       kBucketBytesCap, std::move(names), kFirstBucketBytes});
}

void DataParallel::broadcastFromRankZero() {
  std::vector<at::Tensor> states;
  for (const auto& parameter : module_.parameters()) {
    states.push_back(parameter.detach());
  }
  for (const auto& buffer : module_.buffers()) {
    states.push_back(buffer.detach());
  }
  if (!states.empty()) {
    c10d::broadcast_coalesced(group_, states, kBroadcastBucketBytes, /*rank=*/0);
  }
}

torch::Tensor DataParallel::forward(const std::function<torch::Tensor()>& run_forward) {
  // Python's DDP calls these on every forward with gradients enabled; the
  // rebuild is a one-time re-bucketing by the real gradient order after the
  // first backward.
  reducer_->prepare_for_forward();
  reducer_->rebuild_buckets();
  auto output = run_forward();
  reducer_->prepare_for_backward({});
  return output;
}

}  // namespace ddprun::worker

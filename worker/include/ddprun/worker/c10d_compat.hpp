// What differs in c10d between the LibTorch versions train builds against,
// decided at compile time from the types themselves, so no version number is
// written down: in 1.13 a ProcessGroupGloo or ProcessGroupNCCL is itself a
// c10d::ProcessGroup; from 2.0 each is a c10d::Backend that a ProcessGroup
// dispatches to by device type (what Python's init_process_group builds), and
// the ProcessGroup's own constructor changed again later (options, then
// none). The Reducer's constructor changed shape three times. Only the branch that fits
// the LibTorch at hand is instantiated (every branch is a template).
// Each constructor shape is known from PyTorch's headers of its version; a
// version whose shapes differ again fails to compile here, not at run time.
// Header only, no state; called on the main thread while the group is built.
#pragma once

#include <memory>
#include <string>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/reducer.hpp>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

namespace ddprun::worker::c10d_compat {

// 2.x's ProcessGroup::BackendType for "gloo" or "nccl".
template <typename Group>
typename Group::BackendType backendType(const std::string& backend) {
  return backend == "nccl" ? Group::BackendType::NCCL : Group::BackendType::GLOO;
}

// A ProcessGroup over `store` whose collectives go to `backend` ("gloo" or
// "nccl", on `device_type`'s tensors), as torch.distributed builds one.
template <typename Group = c10d::ProcessGroup, typename Store = c10d::Store>
c10::intrusive_ptr<Group> makeGroup(const c10::intrusive_ptr<Store>& store, int rank, int size,
                                    const std::string& backend) {
  if constexpr (std::is_constructible_v<Group, c10::intrusive_ptr<Store>, int, int>) {
    auto group = c10::make_intrusive<Group>(store, rank, size);
    group->setDefaultBackend(backendType<Group>(backend));
    return group;
  } else {
    // 2.0 to 2.5: the default backend is named by the group's options.
    return c10::make_intrusive<Group>(store, rank, size,
                                      c10::make_intrusive<typename Group::Options>(backend));
  }
}

// `implementation` (a ProcessGroupGloo or ProcessGroupNCCL) as the
// ProcessGroup that train, the Reducer and its collectives use.
template <typename Implementation>
c10::intrusive_ptr<c10d::ProcessGroup> asProcessGroup(
    c10::intrusive_ptr<Implementation> implementation, const c10::intrusive_ptr<c10d::Store>& store,
    int rank, int size, c10::DeviceType device_type, const std::string& backend) {
  if constexpr (std::is_base_of_v<c10d::ProcessGroup, Implementation>) {
    return implementation;  // 1.13: the implementation is the group
  } else {
    // Named through Implementation, so that 1.13 never instantiates it.
    using Group = std::conditional_t<sizeof(Implementation) != 0, c10d::ProcessGroup, void>;
    auto group = makeGroup<Group>(store, rank, size, backend);
    c10::intrusive_ptr<c10d::Backend> as_backend = std::move(implementation);
    group->setBackend(device_type, backendType<Group>(backend), as_backend);
    return group;
  }
}

// The types of the Reducer's constructor arguments that train gives.
namespace reducer_args {
using Tensors = std::vector<at::Tensor>;
using Indices = std::vector<std::vector<size_t>>;
using Limits = std::vector<size_t>;
using Group = c10::intrusive_ptr<c10d::ProcessGroup>;
using Sparse = std::vector<bool>;
using Names = std::unordered_map<size_t, std::string>;
}  // namespace reducer_args

// What train gives c10d::Reducer (data_parallel.cpp), whatever the version.
struct ReducerArgs {
  reducer_args::Tensors params;
  reducer_args::Indices bucket_indices;
  reducer_args::Limits bucket_limits;  // per bucket, from compute_bucket_assignment_by_size
  reducer_args::Group group;
  reducer_args::Sparse expect_sparse;
  int64_t bucket_bytes_cap = 0;
  reducer_args::Names names;
  int64_t first_bucket_bytes_cap = 0;
};

// c10d::Reducer as DDP builds it (no unused parameters, gradients copied
// out of the buckets) from the constructor this version has: 1.13 to 2.6
// take the per-bucket limits; 2.7 added skip_all_reduce_unused_params and
// use_python_reducer (both false, as DDP's defaults); later versions dropped
// the limits (the Reducer sizes the buckets itself), then added per-bucket
// caps (none: bucket_bytes_cap for every bucket) and batched_grad_copy
// (defaulted).
template <typename Reducer = c10d::Reducer>
std::unique_ptr<Reducer> makeReducer(ReducerArgs a) {
  using namespace reducer_args;
  static constexpr bool kFindUnused = false;
  static constexpr bool kGradientAsBucketView = false;
  // Each takes what its shape adds after first_bucket_bytes_cap; only the
  // one called is instantiated.
  auto withLimits = [&a](auto... added) {
    return std::make_unique<Reducer>(
        std::move(a.params), std::move(a.bucket_indices), std::move(a.bucket_limits),
        std::move(a.group), std::move(a.expect_sparse), a.bucket_bytes_cap, kFindUnused,
        kGradientAsBucketView, std::move(a.names), a.first_bucket_bytes_cap, added...);
  };
  auto withoutLimits = [&a](auto... added) {
    return std::make_unique<Reducer>(std::move(a.params), std::move(a.bucket_indices),
                                     std::move(a.group), std::move(a.expect_sparse),
                                     a.bucket_bytes_cap, kFindUnused, kGradientAsBucketView,
                                     std::move(a.names), a.first_bucket_bytes_cap, added...);
  };
  if constexpr (std::is_constructible_v<Reducer, Tensors, Indices, Limits, Group, Sparse, int64_t,
                                        bool, bool, Names, int64_t>) {
    return withLimits();
  } else if constexpr (std::is_constructible_v<Reducer, Tensors, Indices, Limits, Group, Sparse,
                                               int64_t, bool, bool, Names, int64_t, bool, bool>) {
    return withLimits(false, false);
  } else if constexpr (std::is_constructible_v<Reducer, Tensors, Indices, Group, Sparse, int64_t,
                                               bool, bool, Names, int64_t, bool, bool>) {
    return withoutLimits(false, false);
  } else {
    return withoutLimits(false, false, std::vector<int64_t>{});
  }
}

// Ends an NCCL group's communicators before they are destroyed, as
// destroy_process_group does (2.x's ProcessGroupNCCL warns otherwise);
// nothing where ProcessGroup has no shutdown (1.13). Gloo is left alone:
// 2.x's Backend::shutdown throws for backends that do not implement it.
template <typename Group>
void shutdownNccl(const c10::intrusive_ptr<Group>& group, const std::string& backend) {
  if constexpr (requires { group->shutdown(); }) {
    if (backend == "nccl") {
      group->shutdown();
    }
  }
}

}  // namespace ddprun::worker::c10d_compat

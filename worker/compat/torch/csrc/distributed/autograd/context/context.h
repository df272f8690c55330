// Stand-in for a LibTorch header that Debian's libtorch-dev leaves out.
//
// c10d's reducer.hpp (shipped) includes this distributed-autograd header
// (not shipped) for two names only: DistAutogradContext::GradCallback, which
// it static_asserts to be std::function<bool(at::Tensor&)>, and ContextPtr,
// held as a shared_ptr plus an atomic raw pointer. Neither member's layout
// depends on the class body, so declaring the names is enough to use the
// Reducer compiled into libtorch_cpu. worker/CMakeLists.txt puts this
// directory on the include path only when the real header is missing.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>

namespace torch::distributed::autograd {

class DistAutogradContext {
 public:
  using GradCallback = std::function<bool(at::Tensor&)>;
};

using ContextPtr = std::shared_ptr<DistAutogradContext>;

}  // namespace torch::distributed::autograd

#include "ddprun/worker/nccl_environment.hpp"

#include <torch/version.h>

#include <cstdlib>

#include "ddprun/proto/env_contract.hpp"

namespace ddprun::worker {
namespace {

std::optional<std::string> variable(std::string_view name) {
  const char* value = std::getenv(std::string(name).c_str());
  return value ? std::optional<std::string>(value) : std::nullopt;
}

}  // namespace

NcclVariableRename renameLegacyNcclVariable(int major, int minor,
                                            const std::optional<std::string>& modern,
                                            const std::optional<std::string>& legacy) {
  if (major < 2 || (major == 2 && minor < 2) || !legacy) {
    return {};  // it reads the old name, or the old name is not set
  }
  // 2.2 and later prefer the new name when both are set; a user's old one
  // alone keeps its value under the new name.
  return {modern ? std::nullopt : legacy, true};
}

void keepOnlyTheNcclVariableLibTorchReads() {
  const std::string modern_name(proto::env::kNcclAsyncErrorHandling);
  const std::string legacy_name(proto::env::kLegacyNcclAsyncErrorHandling);
  const auto change = renameLegacyNcclVariable(TORCH_VERSION_MAJOR, TORCH_VERSION_MINOR,
                                               variable(modern_name), variable(legacy_name));
  if (change.set_modern) {
    ::setenv(modern_name.c_str(), change.set_modern->c_str(), 1);
  }
  if (change.unset_legacy) {
    ::unsetenv(legacy_name.c_str());
  }
}

}  // namespace ddprun::worker

// The name train's own LibTorch reads for NCCL's async error handling. The
// agent sets both TORCH_NCCL_ASYNC_ERROR_HANDLING (PyTorch 2.2 and later)
// and NCCL_ASYNC_ERROR_HANDLING (1.13 to 2.1), since it cannot know which
// its workers read; 2.2 and later warn at every start when the old name is
// set. train knows its LibTorch, so it keeps the one name that LibTorch
// reads, with the value it would have read. Called first thing in main(),
// before any thread can read the environment.
#pragma once

#include <optional>
#include <string>

namespace ddprun::worker {

struct NcclVariableRename {
  std::optional<std::string> set_modern;  // the value TORCH_NCCL_... gets, if it must change
  bool unset_legacy = false;              // drop NCCL_ASYNC_ERROR_HANDLING
};

// What to change for a LibTorch of version major.minor, given the two
// variables as they are (unset: nullopt). Nothing before 2.2.
NcclVariableRename renameLegacyNcclVariable(int major, int minor,
                                            const std::optional<std::string>& modern,
                                            const std::optional<std::string>& legacy);

// Applies renameLegacyNcclVariable for this build's LibTorch to the process
// environment.
void keepOnlyTheNcclVariableLibTorchReads();

}  // namespace ddprun::worker

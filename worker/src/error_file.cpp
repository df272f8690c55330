#include "ddprun/worker/error_file.hpp"

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "ddprun/proto/env_contract.hpp"

namespace ddprun::worker {

void writeErrorFile(const std::string& message) {
  const char* path = std::getenv(std::string(proto::env::kErrorFile).c_str());
  if (path == nullptr || *path == '\0') {
    return;
  }
  try {
    std::error_code ignored;
    if (std::filesystem::exists(path, ignored)) {
      return;
    }
    const auto now = std::chrono::system_clock::now().time_since_epoch();
    const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(now).count();
    // torch's fields, plus the monotonic time (CLOCK_MONOTONIC, shared by the
    // processes of one host) that lets ddprun order failures finer than the
    // second, as torchrun orders them by this timestamp.
    const auto monotonic = std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::chrono::steady_clock::now().time_since_epoch());
    const nlohmann::json report = {{"message",
                                    {{"message", message},
                                     {"extraInfo",
                                      {{"py_callstack", "train: " + message},
                                       {"timestamp", std::to_string(seconds)},
                                       {"monotonic_ns", std::to_string(monotonic.count())}}}}}};
    std::ofstream(path) << report.dump() << "\n";
  } catch (...) {
    // Best effort only; the message is on stderr already.
  }
}

}  // namespace ddprun::worker

#include "ddprun/test_support/train_snapshot.hpp"

#include <regex>

#include "ddprun/test_support/command.hpp"

namespace ddprun::test_support {

int trainSnapshotEpochs(const std::string& train_binary, const std::string& snapshot_path) {
  CommandOptions options;
  options.env = {{"PATH", "/usr/bin:/bin"}};
  options.timeout = std::chrono::seconds(60);
  options.throw_on_timeout = true;
  const CommandResult inspected =
      runCommand({train_binary, "--inspect-snapshot", snapshot_path}, options);
  static const std::regex epochs(R"("epochs_run":([0-9]+))");
  std::smatch match;
  if (inspected.code != 0 || !std::regex_search(inspected.output, match, epochs)) {
    return -1;
  }
  return std::stoi(match[1].str());
}

}  // namespace ddprun::test_support

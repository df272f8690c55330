// NetnsTrainTest: the network-namespace job fixture with `train` workers
// (mlp, a snapshot every epoch on the shared temp dir): the train command
// line, the epochs a snapshot holds, the group rank an agent logged for a
// round, and the snapshots saved. Used by one test thread.
#pragma once

#include <regex>
#include <string>
#include <vector>

#include "ddprun/test_support/train_snapshot.hpp"
#include "netns_job.hpp"

namespace ddprun::netns_test {

class NetnsTrainTest : public NetnsJobTest {
 protected:
  std::string snapshot() const { return (dir_.path() / "snapshot.pt").string(); }

  // train --task mlp with a snapshot every epoch; `extra` after the rest.
  std::vector<std::string> train(int total_epochs, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> argv = {TRAIN_BINARY,
                                     "--task",
                                     "mlp",
                                     "--total-epochs",
                                     std::to_string(total_epochs),
                                     "--save-every",
                                     "1",
                                     "--batch-size",
                                     "32",
                                     "--snapshot-path",
                                     snapshot(),
                                     "--timeout",
                                     "60"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return argv;
  }

  // Epochs the snapshot holds; -1 if none.
  int snapshotEpochs() const { return test_support::trainSnapshotEpochs(TRAIN_BINARY, snapshot()); }

  // The group rank `name`'s agent logged for `round`, or -1.
  int groupRank(const std::string& name, int round) const {
    std::smatch match;
    const std::string text = log(name);
    const std::regex line("round " + std::to_string(round) + ": node ([0-9]+) of");
    return std::regex_search(text, match, line) ? std::stoi(match[1].str()) : -1;
  }

  // Lines "train: epoch N | snapshot saved" in `name`'s log after `from`.
  static int savesAfter(const std::string& text, std::size_t from) {
    int saves = 0;
    for (auto at = text.find("| snapshot saved to", from); at != std::string::npos;
         at = text.find("| snapshot saved to", at + 1)) {
      ++saves;
    }
    return saves;
  }
};

}  // namespace ddprun::netns_test

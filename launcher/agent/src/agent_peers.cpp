// The agent's side of a hang across nodes (docs/launcher.md, Hung workers):
// the line to the group's other agents (Rendezvous::openPeerChannel), opened
// for each attempt; asking them for their workers' stacks before a hung
// worker here is killed, and answering when one of them asks. Runs on the
// agent's loop; the channel's threads only post to it.
#include <signal.h>

#include "agent_impl.hpp"
#include "ddprun/launcher/core/log.hpp"

namespace ddprun::launcher {
namespace {

namespace asio = net::asio;

// How long a node that judged a worker hung waits for the other nodes'
// stacks before it kills it anyway: each takes tens of milliseconds with
// eu-stack, so only a node that is itself in trouble takes longer.
constexpr auto kPeerStacksBound = std::chrono::seconds(3);

std::string describeAnswers(const std::vector<StackAnswer>& answers,
                            const std::vector<int>& silent) {
  std::string text;
  for (const StackAnswer& answer : answers) {
    text += "node " + std::to_string(answer.group_rank) + ": " + answer.where + "\n";
  }
  for (int group_rank : silent) {
    text += "node " + std::to_string(group_rank) + ": no answer within " +
            std::to_string(kPeerStacksBound.count()) + " s\n";
  }
  return text;
}

}  // namespace

void Agent::Impl::openPeerChannel() {
  peers.reset();  // the last attempt's: its threads are joined here
  peers = rendezvous.openPeerChannel(group);
  if (!peers) {
    return;
  }
  peers->listen([this, attempt = group.attempt](const StackRequest& request) {
    asio::post(io, [this, attempt, request] { onStacksAsked(attempt, request); });
  });
}

void Agent::Impl::askPeersForStacks(std::size_t index, const std::string& reason,
                                    std::function<void(std::string)> done) {
  if (!peers) {
    done("");
    return;
  }
  const Worker& worker = workers.at(index);
  const std::string why = "rank " + std::to_string(worker.rank) + " (local rank " +
                          std::to_string(worker.local_rank) + " on " + config.hostname + ") is " +
                          reason;
  log().warn("asking the other {} node(s) of round {} for their workers' stacks",
             group.group_world_size - 1, group.attempt);
  peers->askForStacks(why, kPeerStacksBound,
                      [this, done = std::move(done)](const std::vector<StackAnswer>& answers,
                                                     const std::vector<int>& silent) {
                        asio::post(io,
                                   [done, text = describeAnswers(answers, silent)] { done(text); });
                      });
}

void Agent::Impl::onStacksAsked(int attempt, const StackRequest& request) {
  if (!peers || attempt != group.attempt) {
    return;  // that group is gone, and its channel with it
  }
  if (phase != Phase::Running) {
    peers->answerStacks(config.hostname + ": its workers were already stopping");
    return;
  }
  log().warn("node {} of round {} says {}: taking the stacks of every local worker",
             request.group_rank, attempt, request.why);
  watchdogs.captureForPeer([this, attempt](const std::string& where) {
    if (peers && attempt == group.attempt) {
      peers->answerStacks(config.hostname + ": " + where);
    }
  });
}

}  // namespace ddprun::launcher

// StaticRendezvous's waits on node 0's store: for every node's key of a
// step (join, a restart's barrier, the exit barrier), saying which node ranks
// it still waits for, and one line naming them when the step times out.
// Runs on the thread that runs the step (see static_rendezvous.hpp).
#include <algorithm>

#include "ddprun/launcher/rendezvous/static_rendezvous.hpp"
#include "ddprun/launcher/rendezvous/wait_notice.hpp"
#include "ddprun/proto/errors.hpp"
#include "ddprun/proto/visible_text.hpp"
#include "ddprun/rendezvous/client.hpp"
#include "ddprun/rendezvous/server.hpp"

namespace ddprun::launcher {
namespace {

using Clock = std::chrono::steady_clock;
using Duration = StaticRendezvous::Duration;

std::string within(Duration timeout) { return " within " + describeSeconds(timeout); }

}  // namespace

// What a notice says is missing: the node ranks, while there are few enough
// to ask after each (one CHECK per rank, every few seconds); "" once none is.
std::string StaticRendezvous::missingForNotice(const std::string& name, int first) {
  constexpr int kListedAtMost = 32;
  if (options_.nnodes - first > kListedAtMost) {
    return "some of the " + std::to_string(options_.nnodes - first);
  }
  return missingRanks(name, first);
}

// "1, 2": the node ranks from `first` whose "<name>/<rank>" key is missing.
std::string StaticRendezvous::missingRanks(const std::string& name, int first) {
  std::string missing;
  for (int rank = first; rank < options_.nnodes; ++rank) {
    if (!client_->check({key(name + "/" + std::to_string(rank))})) {
      missing += (missing.empty() ? "" : ", ") + std::to_string(rank);
    }
  }
  return missing;
}

// "; <why>" for each node rank from `first` that has not joined because its
// agent was refused (refuseIfUnlikeNodeZero); "" for steps other than the
// join, and for more ranks than are asked after one by one.
std::string StaticRendezvous::refusals(const std::string& name, int first) {
  constexpr int kAskedAtMost = 32;
  std::string reasons;
  if (name != "node" || options_.nnodes - first > kAskedAtMost) {
    return reasons;
  }
  for (int rank = std::max(first, 1); rank < options_.nnodes; ++rank) {
    const std::string refused = key("refused/" + std::to_string(rank));
    if (!client_->check({key("node/" + std::to_string(rank))}) && client_->check({refused})) {
      const std::string reason = client_->get(refused);  // "" once a corrected agent came
      if (!reason.empty()) {
        reasons += "; " + proto::visible(reason);
      }
    }
  }
  return reasons;
}

// Waits for every node's "<name>/<rank>" key, saying which node ranks it
// still waits for and for what ("to join the store at ..."); `timeout` (how
// long the whole wait may take) is for the message.
void StaticRendezvous::waitForNodes(const std::string& name, int first, TimePoint deadline,
                                    Duration timeout, const std::string& waiting_for,
                                    const std::string& did_not) {
  WaitNotice notice(
      [&] {
        const std::string missing = missingForNotice(name, first);
        return missing.empty()
                   ? missing
                   : "node rank(s) " + missing + " of " + std::to_string(options_.nnodes) + " " +
                         waiting_for + refusals(name, first);
      },
      deadline);
  try {
    waitForKeys(perNodeKeys(name, first), notice);
  } catch (const TimeoutError&) {
    throw TimeoutError(timeoutMessage(name, first, did_not, timeout));
  }
}

// Blocks until every key exists, in slices, ticking the notice between them.
void StaticRendezvous::waitForKeys(const std::vector<std::string>& keys, WaitNotice& notice) {
  for (;;) {
    try {
      client_->wait(keys, notice.next());
      return;
    } catch (const TimeoutError&) {
      if (notice.expired()) {
        throw;
      }
    }
    notice.tick();
  }
}

std::string StaticRendezvous::timeoutMessage(const std::string& name, int first,
                                             const std::string& did_not, Duration timeout) {
  const std::string missing = missingRanks(name, first);
  std::string message =
      "static rendezvous: " +
      (missing.empty()
           ? "every node got there, but node rank 0 (which hosts the store) did not "
             "move on: it did not "
           : "node rank(s) " + missing + " of " + std::to_string(options_.nnodes) + " did not ") +
      did_not + within(timeout) + " (store at " + storeAddress() + ", run id " + options_.run_id +
      ")";
  if (client_->check({key("error")})) {
    message += "; " + proto::visible(client_->get(key("error")));  // node 0's words
  }
  return message + refusals(name, first);
}

void StaticRendezvous::beforeAttempt(int attempt) {
  DDPRUN_ASSERT(client_ != nullptr, "beforeAttempt() before join()");
  if (attempt <= 0) {
    return;  // a fresh store: only agent keys, which workers never touch
  }
  if (options_.nnodes == 1) {
    server_->clearKeySpace();
    return;
  }
  // The clear also wipes the agent keys (one key space for everyone), which
  // is safe here: every node is inside this barrier, join's keys are spent,
  // and the keys read after the clear ("cleared", then the exit barrier's)
  // are written after it.
  const auto deadline = Clock::now() + options_.join_timeout;
  const std::string prefix = "attempt/" + std::to_string(attempt);
  client_->add(key(prefix + "/node/" + std::to_string(options_.node_rank)), 1);
  const std::string waiting_for = "to stop their workers for attempt " + std::to_string(attempt);
  const std::string did_not = "reach attempt " + std::to_string(attempt) +
                              " (every node must stop its workers before the store is emptied)";
  if (server_) {
    waitForNodes(prefix + "/node", 0, deadline, options_.join_timeout, waiting_for, did_not);
    server_->clearKeySpace();
    client_->set(key(prefix + "/cleared"), "1");
    return;
  }
  WaitNotice notice(
      [&] {
        const std::string missing = missingForNotice(prefix + "/node", 0);
        return "node rank 0 to empty the store for attempt " + std::to_string(attempt) +
               (missing.empty()
                    ? std::string()
                    : " (node rank(s) " + missing + " of " + std::to_string(options_.nnodes) +
                          " have not stopped their workers yet)");
      },
      deadline);
  try {
    waitForKeys({key(prefix + "/cleared")}, notice);
  } catch (const TimeoutError&) {
    throw TimeoutError(timeoutMessage(prefix + "/node", 0, did_not, options_.join_timeout));
  }
}

void StaticRendezvous::exitBarrier(Duration timeout) {
  DDPRUN_ASSERT(client_ != nullptr, "exitBarrier() before join()");
  if (options_.nnodes == 1) {
    return;
  }
  const auto deadline = Clock::now() + timeout;
  const std::string rank = std::to_string(options_.node_rank);
  client_->add(key("done/" + rank), 1);
  waitForNodes("done", 0, deadline, timeout, "to finish (the exit barrier)",
               "reach the exit barrier");
  if (server_) {
    // Node 0 leaves last: stopping the server as soon as "done" is complete
    // could drop the wake-up of a slower node's WAIT.
    waitForNodes("left", 1, deadline, timeout, "to leave the exit barrier",
                 "leave the exit barrier");
  } else {
    client_->add(key("left/" + rank), 1);  // answered, so counted before we go
  }
}

}  // namespace ddprun::launcher

#include "ddprun/launcher/elastic_membership.hpp"

#include "ddprun/proto/errors.hpp"
#include "log.hpp"
#include "store_connection.hpp"
#include "wait_notice.hpp"

namespace ddprun::launcher {
namespace {

namespace protocol = proto::rendezvous;
using protocol::EventType;
using protocol::Verb;
using Clock = std::chrono::steady_clock;

// The event reader waits for the daemon's next push for as long as the run
// lasts; shutdown interrupts it, it never times out in practice.
constexpr std::chrono::hours kEventWait{24 * 365};

ElasticRound roundFrom(const protocol::Event& event) {
  return {event.round,      event.group_rank, event.group_world_size, event.base_rank,
          event.world_size, event.store_host, event.store_port};
}

std::string nodes(const ElasticOptions& options) {
  return "--nnodes " + std::to_string(options.min_nodes) + ":" + std::to_string(options.max_nodes);
}

}  // namespace

ElasticMembership::ElasticMembership(ElasticOptions options) : options_(std::move(options)) {}

ElasticMembership::~ElasticMembership() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (lease_) {
    try {
      send(Verb::kLeave, options_.agent_id);
    } catch (const std::exception&) {
      // The daemon is gone; dropping the connection below says the same.
    }
  }
  if (heartbeat_.joinable()) {
    heartbeat_.join();
  }
  if (reader_.joinable()) {
    reader_.join();
  }
}

std::string ElasticMembership::endpoint() const {
  const bool v6 = options_.host.find(':') != std::string::npos;
  return (v6 ? "[" + options_.host + "]" : options_.host) + ":" + std::to_string(options_.port);
}

bool ElasticMembership::join() {
  WaitNotice notice(
      [this] {
        return "the rendezvous at " + endpoint() + " (rendezvous '" + options_.run_id +
               "'; an agent that hosts it, or ddprund, must serve it there)";
      },
      Clock::now() + options_.join_timeout);
  std::unique_ptr<rdzv::StoreClient> lease;
  try {
    lease = connectToStore(options_.host, options_.port, notice, cancelled_);
  } catch (const TimeoutError& error) {
    throw TimeoutError("rendezvous '" + options_.run_id + "': nothing served it at " + endpoint() +
                       " within join_timeout (" + describeSeconds(options_.join_timeout) +
                       "): " + error.what());
  }
  if (!lease) {
    return false;
  }
  protocol::JoinRequest request;
  request.agent = options_.agent_id;
  request.local_world_size = options_.local_world_size;
  request.node_rank = options_.node_rank_hint;
  request.min_nodes = options_.min_nodes;
  request.max_nodes = options_.max_nodes;
  request.last_call_timeout = options_.last_call_timeout;
  request.keep_alive_timeout = options_.keep_alive_interval * options_.keep_alive_max_attempt;
  request.store_host = options_.local_addr.empty() ? lease->localAddress() : options_.local_addr;
  request.store_port = options_.store_port;
  {
    std::lock_guard lock(lease_mutex_);
    lease_ = std::move(lease);
    lease_->set(protocol::verbKey(options_.run_id, Verb::kJoin), protocol::encodeJoin(request));
  }
  reader_ = std::thread([this] { readEvents(); });
  heartbeat_ = std::thread([this] { sendHeartbeats(); });
  return true;
}

void ElasticMembership::send(Verb verb, const std::string& value) {
  std::lock_guard lock(lease_mutex_);
  lease_->set(protocol::verbKey(options_.run_id, verb), value);
}

// Records one event; returns whether the agent's running round is over.
bool ElasticMembership::recordEvent(const protocol::Event& event) {
  std::lock_guard lock(mutex_);
  switch (event.type) {
    case EventType::kRound:
      latest_ = roundFrom(event);
      spare_ = false;
      suspended_ = false;
      break;
    case EventType::kSuspended:
      suspended_ = true;
      break;
    case EventType::kSpare:
      spare_ = true;
      break;
    case EventType::kClosed:
    case EventType::kLeft:
      closed_ = true;
      failed_on_ = event.failed_on;
      break;
    case EventType::kDropped:
      closed_ = true;
      dropped_ = true;
      break;
    case EventType::kFinished:
      finished_ = event.round == returned_;
      break;
    case EventType::kError:
      error_ = event.message;
      break;
  }
  // "suspended" and "spare" only mean: no round to run now. A plain close
  // does not stop workers that are running: it comes first from the agent
  // that finished first, while the others finish too.
  return returned_ >= 0 && (event.type == EventType::kRound ||
                            event.type == EventType::kSuspended || failed_on_ || dropped_);
}

void ElasticMembership::readEvents() {
  try {
    rdzv::StoreClient events(options_.host, options_.port, options_.join_timeout);
    events.setTimeout(std::chrono::duration_cast<std::chrono::milliseconds>(kEventWait));
    for (std::int64_t n = 0;; ++n) {
      const protocol::Event event = protocol::decodeEvent(
          events.get(protocol::eventKey(options_.run_id, options_.agent_id, n)));
      const bool round_over = recordEvent(event);
      changed_.notify_all();
      if (round_over) {
        // Under notify_mutex_, so onChange({}) returning means no call runs.
        std::lock_guard callback_lock(notify_mutex_);
        if (notify_) {
          const bool aborted =
              event.type == EventType::kClosed || event.type == EventType::kDropped;
          notify_(aborted ? kAborted : event.round);
        }
      }
      if (event.type == EventType::kClosed || event.type == EventType::kLeft ||
          event.type == EventType::kError || event.type == EventType::kDropped) {
        return;  // the last event this agent gets
      }
    }
  } catch (const std::exception& error) {
    std::lock_guard lock(mutex_);
    if (!stopping_) {
      error_ = std::string("lost the rendezvous daemon: ") + error.what();
    }
    closed_ = true;
  }
  changed_.notify_all();
}

void ElasticMembership::sendHeartbeats() {
  try {
    rdzv::StoreClient beats(options_.host, options_.port, options_.join_timeout);
    std::unique_lock lock(mutex_);
    while (!changed_.wait_for(lock, options_.keep_alive_interval,
                              [this] { return stopping_ || closed_; })) {
      lock.unlock();
      beats.set(protocol::verbKey(options_.run_id, Verb::kHeartbeat), options_.agent_id);
      lock.lock();
    }
  } catch (const std::exception&) {
    // The reader sees the same loss and reports it.
  }
}

// What nextRound() waits for, as the daemon last said.
std::string ElasticMembership::waitingFor() {
  std::lock_guard lock(mutex_);
  const std::string where = "rendezvous '" + options_.run_id + "' at " + endpoint();
  if (spare_) {
    return "a place in " + where + ": the round is full (" + nodes(options_) +
           "), so this node stands by as a spare";
  }
  if (suspended_) {
    return "nodes to rejoin " + where + ": the round fell below " + nodes(options_);
  }
  return (returned_ < 0 ? "round 0" : "the next round") + std::string(" of ") + where + " (" +
         nodes(options_) + ")";
}

std::string ElasticMembership::timeoutMessage() const {
  return "rendezvous '" + options_.run_id + "' at " + endpoint() +
         ": no round formed within join_timeout (" + describeSeconds(options_.join_timeout) +
         "): fewer than " + std::to_string(options_.min_nodes) + " nodes joined";
}

std::optional<ElasticRound> ElasticMembership::nextRound() {
  auto deadline = Clock::now() + options_.join_timeout;
  WaitNotice notice([this] { return waitingFor(); }, deadline);
  std::unique_lock lock(mutex_);
  for (;;) {
    if (cancelled_) {
      return std::nullopt;
    }
    if (!error_.empty()) {
      throw Error("rendezvous '" + options_.run_id + "' at " + endpoint() + ": " + error_);
    }
    if (latest_ && latest_->round > returned_) {
      returned_ = latest_->round;
      return latest_;
    }
    if (closed_) {
      return std::nullopt;
    }
    if (spare_) {
      deadline = Clock::now() + options_.join_timeout;  // torchrun: no timeout as a spare
      if (notice.expired()) {
        notice = WaitNotice([this] { return waitingFor(); }, deadline);  // keep saying so
      }
    } else if (Clock::now() >= deadline) {
      throw TimeoutError(timeoutMessage());
    }
    lock.unlock();
    notice.tick();
    lock.lock();
    const auto slice = std::min<std::chrono::milliseconds>(
        notice.next(),
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()) +
            std::chrono::milliseconds(1));
    changed_.wait_for(lock, slice, [this] {
      return cancelled_ || closed_ || !error_.empty() || (latest_ && latest_->round > returned_);
    });
  }
}

void ElasticMembership::cancelWait() {
  {
    std::lock_guard lock(mutex_);
    cancelled_ = true;
  }
  changed_.notify_all();
}

void ElasticMembership::onChange(std::function<void(std::int64_t)> notify) {
  std::lock_guard lock(notify_mutex_);
  notify_ = std::move(notify);
}

void ElasticMembership::requestRestart() { send(Verb::kRestart, options_.agent_id); }

void ElasticMembership::close(bool failed) {
  send(failed ? Verb::kAbort : Verb::kClose, options_.agent_id);
}

bool ElasticMembership::dropped() {
  std::lock_guard lock(mutex_);
  return dropped_;
}

std::optional<std::string> ElasticMembership::failedOn() {
  std::lock_guard lock(mutex_);
  return failed_on_;
}

ElasticMembership::Finish ElasticMembership::finish(std::chrono::milliseconds timeout) {
  send(Verb::kDone, options_.agent_id);
  WaitNotice notice(
      [this] {
        return "the other nodes of rendezvous '" + options_.run_id +
               "' to finish (the exit barrier)";
      },
      Clock::now() + timeout);
  std::unique_lock lock(mutex_);
  const auto settled = [this] {
    return finished_ || closed_ || !error_.empty() || (latest_ && latest_->round > returned_);
  };
  while (!settled() && !notice.expired()) {
    changed_.wait_for(lock, notice.next(), settled);
    lock.unlock();
    notice.tick();
    lock.lock();
  }
  if (finished_) {
    return Finish::kAllDone;
  }
  if (latest_ && latest_->round > returned_) {
    return Finish::kRoundMoved;
  }
  return closed_ || !error_.empty() ? Finish::kClosed : Finish::kTimedOut;
}

}  // namespace ddprun::launcher

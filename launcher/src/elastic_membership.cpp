#include "ddprun/launcher/elastic_membership.hpp"

#include <nlohmann/json.hpp>

#include "ddprun/proto/errors.hpp"
#include "ddprun/rendezvous/rendezvous_service.hpp"

namespace ddprun::launcher {
namespace {

using nlohmann::json;
using rdzv::RendezvousService;

// The event reader waits for the daemon's next push for as long as the run
// lasts; shutdown interrupts it, it never times out in practice.
constexpr std::chrono::hours kEventWait{24 * 365};

std::string joinRequest(const ElasticOptions& options) {
  json request = {
      {"agent", options.agent_id},
      {"local_world_size", options.local_world_size},
      {"min_nodes", options.min_nodes},
      {"max_nodes", options.max_nodes},
      {"last_call_timeout_ms", options.last_call_timeout.count()},
      {"keep_alive_timeout_ms",
       (options.keep_alive_interval * options.keep_alive_max_attempt).count()},
  };
  if (options.node_rank_hint) {
    request["node_rank"] = *options.node_rank_hint;
  }
  return request.dump();
}

ElasticRound roundFrom(const json& event) {
  return {event.at("round").get<std::int64_t>(), event.at("group_rank").get<int>(),
          event.at("group_world_size").get<int>(), event.at("base_rank").get<int>(),
          event.at("world_size").get<int>()};
}

std::string storeKey(const std::string& run_id, std::int64_t round) {
  // Not under the reserved prefix: a plain key in the daemon's store.
  return "ddprun/workerstore/" + run_id + "/" + std::to_string(round);
}

}  // namespace

ElasticMembership::ElasticMembership(ElasticOptions options) : options_(std::move(options)) {
  lease_ = std::make_unique<rdzv::StoreClient>(options_.host, options_.port, options_.join_timeout);
  lease_->set(key("join"), joinRequest(options_));
  reader_ = std::thread([this] { readEvents(); });
  heartbeat_ = std::thread([this] { sendHeartbeats(); });
}

ElasticMembership::~ElasticMembership() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  try {
    lease_->set(key("leave"), options_.agent_id);
  } catch (const std::exception&) {
    // The daemon is gone; dropping the connection below says the same.
  }
  heartbeat_.join();
  reader_.join();
}

std::string ElasticMembership::key(const std::string& verb) const {
  return std::string(RendezvousService::kPrefix) + options_.run_id + "/" + verb;
}

// Records one event; returns whether the agent's running round is over.
bool ElasticMembership::recordEvent(const json& event) {
  const std::string type = event.value("type", "");
  std::lock_guard lock(mutex_);
  if (type == "round") {
    latest_ = roundFrom(event);
  } else if (type == "closed" || type == "left") {
    closed_ = true;
    if (event.contains("failed_on")) {
      failed_on_ = event["failed_on"].get<std::string>();
    }
  } else if (type == "dropped") {
    closed_ = true;
    dropped_ = true;
  } else if (type == "finished") {
    finished_ = event.value("round", std::int64_t{-1}) == returned_;
  } else if (type == "error") {
    error_ = event.value("message", "the rendezvous refused this agent");
  }
  // "suspended" and "spare" only mean: no round to run now. A plain close
  // does not stop workers that are running: it comes first from the agent
  // that finished first, while the others finish too.
  return returned_ >= 0 && (type == "round" || type == "suspended" || failed_on_ || dropped_);
}

void ElasticMembership::readEvents() {
  try {
    rdzv::StoreClient events(options_.host, options_.port, options_.join_timeout);
    events.setTimeout(std::chrono::duration_cast<std::chrono::milliseconds>(kEventWait));
    for (std::int64_t n = 0;; ++n) {
      const json event = json::parse(
          events.get(RendezvousService::eventKey(options_.run_id, options_.agent_id, n)));
      const std::string type = event.value("type", "");
      const bool round_over = recordEvent(event);
      changed_.notify_all();
      if (round_over) {
        // Under notify_mutex_, so onChange({}) returning means no call runs.
        std::lock_guard callback_lock(notify_mutex_);
        if (notify_) {
          notify_(type == "closed" || type == "dropped" ? kAborted
                                                        : event.value("round", std::int64_t{0}));
        }
      }
      if (type == "closed" || type == "left" || type == "error" || type == "dropped") {
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
      beats.set(key("heartbeat"), options_.agent_id);
      lock.lock();
    }
  } catch (const std::exception&) {
    // The reader sees the same loss and reports it.
  }
}

std::optional<ElasticRound> ElasticMembership::nextRound() {
  std::unique_lock lock(mutex_);
  const bool arrived = changed_.wait_for(lock, options_.join_timeout, [this] {
    return closed_ || cancelled_ || !error_.empty() || (latest_ && latest_->round > returned_);
  });
  if (cancelled_) {
    return std::nullopt;
  }
  if (!error_.empty()) {
    throw Error("rendezvous '" + options_.run_id + "': " + error_);
  }
  if (latest_ && latest_->round > returned_) {
    returned_ = latest_->round;
    return latest_;
  }
  if (closed_) {
    return std::nullopt;
  }
  DDPRUN_ASSERT(!arrived, "woken without a round, a close or an error");
  throw TimeoutError("rendezvous '" + options_.run_id + "': no round formed within join_timeout (" +
                     std::to_string(options_.join_timeout.count() / 1000) + " s)");
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

void ElasticMembership::requestRestart() { lease_->set(key("restart"), options_.agent_id); }

void ElasticMembership::close(bool failed) {
  lease_->set(key(failed ? "abort" : "close"), options_.agent_id);
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
  lease_->set(key("done"), options_.agent_id);
  std::unique_lock lock(mutex_);
  changed_.wait_for(lock, timeout, [this] {
    return finished_ || closed_ || !error_.empty() || (latest_ && latest_->round > returned_);
  });
  if (finished_) {
    return Finish::kAllDone;
  }
  if (latest_ && latest_->round > returned_) {
    return Finish::kRoundMoved;
  }
  return closed_ || !error_.empty() ? Finish::kClosed : Finish::kTimedOut;
}

std::pair<std::string, std::uint16_t> ElasticMembership::workerStore(const ElasticRound& round) {
  const std::string store_key = storeKey(options_.run_id, round.round);
  if (round.group_rank != 0) {
    const std::string address = lease_->get(store_key);  // waits for node 0 to publish
    const std::size_t colon = address.rfind(':');
    return {address.substr(0, colon),
            static_cast<std::uint16_t>(std::stoi(address.substr(colon + 1)))};
  }
  if (!worker_store_) {
    rdzv::ServerOptions server_options;  // every interface: other nodes' workers connect
    server_options.port = 0;
    worker_store_ = std::make_unique<rdzv::Server>(server_options);
    worker_store_->start();
  }
  if (hosted_round_ != round.round) {
    worker_store_->clearKeySpace();  // each round's workers start on an empty store
    hosted_round_ = round.round;
  }
  const std::string host =
      options_.local_addr.empty() ? lease_->localAddress() : options_.local_addr;
  lease_->set(store_key, host + ":" + std::to_string(worker_store_->port()));
  return {host, worker_store_->port()};
}

}  // namespace ddprun::launcher

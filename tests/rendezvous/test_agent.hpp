// TestAgent: one scripted elastic agent of the rendezvous suites, speaking
// the protocol over a real StoreClient: its own connection (its lease) and
// its event cursor. Agent "x" announces the workers' store
// "store-x:<port given>". Used by one test thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "ddprun/proto/errors.hpp"
#include "ddprun/proto/rendezvous_protocol.hpp"
#include "ddprun/rendezvous/client.hpp"
#include "ddprun/rendezvous/server.hpp"

namespace ddprun::rdzv::testing {

// A started ddprund server on loopback, on a free port, with `threads` I/O
// threads (and `token`, if any, for joins to prove): what the rendezvous
// suites speak to.
inline std::unique_ptr<Server> startLoopbackServer(int threads = 1, std::string token = "") {
  ServerOptions options;
  options.host = "127.0.0.1";
  options.port = 0;
  options.threads = threads;
  options.token = std::move(token);
  auto server = std::make_unique<Server>(options);
  server->start();
  return server;
}

struct JoinSpec {
  int min_nodes = 1;
  int max_nodes = 1;
  int local_world_size = 2;
  int64_t last_call_ms = 30'000;
  int64_t keep_alive_ms = 60'000;
  std::optional<int> max_restarts = std::nullopt;  // unset: as an older agent, which sends none
  int restarts_used = 0;
  std::optional<int> quarantine_after = std::nullopt;  // unset: the rendezvous' default
};

class TestAgent {
 public:
  // `token`: proven in every join, as an agent given token_file does.
  TestAgent(std::uint16_t port, std::string run, std::string id, std::string token = "")
      : port_(port),
        run_(std::move(run)),
        id_(std::move(id)),
        token_(std::move(token)),
        client_(std::make_unique<StoreClient>("127.0.0.1", port, std::chrono::seconds(10))) {}

  void join(const JoinSpec& spec, std::uint16_t store_port = 1) {
    join(spec, store_port, 0, std::nullopt, -1);
  }

  // A join as the given session; `rejoin`: coming back to a round.
  void join(const JoinSpec& spec, std::uint16_t store_port, int64_t session,
            std::optional<proto::rendezvous::Rejoin> rejoin, int64_t last_round) {
    session_ = session;
    next_ = 0;
    proto::rendezvous::JoinRequest request;
    request.session = session;
    request.rejoin = rejoin;
    request.last_round = last_round;
    request.agent = id_;
    request.local_world_size = spec.local_world_size;
    request.min_nodes = spec.min_nodes;
    request.max_nodes = spec.max_nodes;
    request.last_call_timeout = std::chrono::milliseconds(spec.last_call_ms);
    request.keep_alive_timeout = std::chrono::milliseconds(spec.keep_alive_ms);
    request.store_host = "store-" + id_;
    request.store_port = store_port;
    request.max_restarts = spec.max_restarts;
    request.restarts_used = spec.restarts_used;
    request.quarantine_after = spec.quarantine_after;
    namespace protocol = proto::rendezvous;
    if (!token_.empty()) {
      client_->set(protocol::verbKey(run_, protocol::Verb::kChallenge),
                   protocol::challengeRequest(id_, session));
      const std::string nonce = client_->query(protocol::challengeKey(run_, id_, session));
      request.auth = protocol::joinProof(token_, run_, id_, session, nonce);
    }
    const std::string join_key = protocol::verbKey(run_, protocol::Verb::kJoin);
    client_->set(join_key, protocol::encodeJoin(request));
    // A SET has no reply; the join's answer (nothing: it was taken) means
    // the daemon has handled it, so agents joining one after another join
    // in that order.
    if (const std::string refused = client_->query(join_key); !refused.empty()) {
      throw Error("join refused: " + protocol::decodeEvent(refused).message);
    }
  }

  // The verb with the agent's id as its value, as every agent sends most
  // verbs (and older agents every verb).
  void send(proto::rendezvous::Verb verb) { send(verb, id_); }
  // The verb with `value` (a report).
  void send(proto::rendezvous::Verb verb, const std::string& value) {
    client_->set(proto::rendezvous::verbKey(run_, verb), value);
  }
  // Returns once the daemon has handled everything sent so far (the PING's
  // echo comes after it).
  void sync() { client_->ping(); }

  // Blocks until the daemon pushes the next event (a GET waits for the key).
  // As node 0 of a round it says its store is ready, as a real agent does.
  proto::rendezvous::Event nextEvent() {
    StoreClient reader("127.0.0.1", port_, std::chrono::seconds(10));
    proto::rendezvous::Event event = proto::rendezvous::decodeEvent(
        reader.get(proto::rendezvous::eventKey(run_, id_, session_, next_++)));
    if (event.type == proto::rendezvous::EventType::kRound && event.group_rank == 0) {
      send(proto::rendezvous::Verb::kStoreReady);
    }
    return event;
  }

  // Whether an event arrives within `timeout` (without consuming it).
  bool eventWithin(std::chrono::milliseconds timeout) {
    StoreClient reader("127.0.0.1", port_, std::chrono::seconds(10));
    try {
      reader.wait({proto::rendezvous::eventKey(run_, id_, session_, next_)}, timeout);
      return true;
    } catch (const TimeoutError&) {
      return false;
    }
  }

  void disconnect() { client_.reset(); }
  const std::string& id() const { return id_; }

 private:
  std::uint16_t port_;
  std::string run_;
  std::string id_;
  std::string token_;
  std::unique_ptr<StoreClient> client_;
  int64_t session_ = 0;
  int64_t next_ = 0;
};

}  // namespace ddprun::rdzv::testing

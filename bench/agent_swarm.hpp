// N simulated ddprun agents in one process, each speaking the c10d
// rendezvous protocol (docs/rendezvous-protocol.md) to a real ddprund with
// the bytes the real agent sends (launcher/rendezvous/src/elastic_lease.cpp and
// elastic_membership.cpp, through rdzv::StoreClient):
//   - a lease connection: VALIDATE + PING, SET join; a heartbeat (SET
//     heartbeat + PING) every keep_alive_interval; store_ready when it is
//     node 0 of a round; eight clock queries (GET ddprun/query/clock, one
//     after another) once its join is taken; done, and close once finished;
//   - an events connection: VALIDATE + PING, then for event n = 0, 1, ...
//     WAIT for its key, then GET it, as StoreClient::get does.
// Heartbeats are spread evenly over the interval across the agents, rather
// than all at once. The agents react on their own (store_ready, close, the
// next WAIT); the caller drives the phases and reads the counters.
//
// Two things differ from N real agents, both to time the daemon alone: both
// connections are opened before any join (a real agent opens its events
// connection just after its join), and the benchmark may follow a request
// with a PING (sync()) to learn that the daemon has acted on it.
//
// Owns every socket and one epoll set; runs on the calling thread only.
// Errors (a connection the daemon closed, an event no agent should get, a
// phase past its deadline) throw std::runtime_error with one line.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ddprun/proto/rendezvous_protocol.hpp"
#include "round_check.hpp"

namespace ddprun::bench {

class StorePipe;

struct SwarmOptions {
  std::string host = "127.0.0.1";
  std::uint16_t port = 0;
  int agents = 0;
  std::string run_id = "rdzv_scale";
  int local_world_size = 1;
  int min_nodes = 1;
  int max_nodes = 1;
  std::chrono::milliseconds last_call_timeout{300'000};
  std::chrono::milliseconds keep_alive_interval{5'000};
  int keep_alive_max_attempt = 3;
  // Connections connecting or handshaking at once: keeps the daemon's
  // accept queue from overflowing (a dropped SYN costs a 1 s retransmit).
  int connect_window = 1024;
  // 127.0.0.x source addresses the connections are spread over.
  int source_addresses = 1;
  // Acknowledge each event read where the round offers acks, as ddprun's
  // agent does (one SET ack on the lease per event). Off by default: the
  // figures of rdzv_scale in docs/benchmarks.md were taken without acks.
  bool ack_events = false;
  // Says how the daemon ended once it has ("" while it runs), so that a
  // connection it closed is reported as its death.
  std::function<std::string()> daemon_ended;
};

class AgentSwarm {
 public:
  using Clock = std::chrono::steady_clock;

  explicit AgentSwarm(SwarmOptions options);
  ~AgentSwarm();
  AgentSwarm(const AgentSwarm&) = delete;
  AgentSwarm& operator=(const AgentSwarm&) = delete;

  // Opens both connections of every agent; returns once each has answered
  // its handshake PING.
  void connectAll(Clock::time_point deadline);

  // Agent `agent` sends its join (lease) and starts reading its events.
  // Returns the moment the join was written.
  Clock::time_point join(std::size_t agent);
  // Agent `agent` sends `verb` with its id as the value; the moment written.
  Clock::time_point send(std::size_t agent, proto::rendezvous::Verb verb);
  // Follows the agent's last request with a PING; syncs() counts the
  // answers, so the caller knows the daemon has acted on the request.
  void sync(std::size_t agent);
  // The agent dies: both its connections close (the lease first).
  Clock::time_point kill(std::size_t agent);

  // Serves every connection until `done()` holds; throws naming `phase` and
  // `progress()` at the deadline.
  void runUntil(const std::string& phase, const std::function<bool()>& done,
                const std::function<std::string()>& progress, Clock::time_point deadline);

  // Counters, and the moment each last moved.
  int syncs() const { return syncs_; }
  // Agents holding at least `count` round events.
  int holding(std::size_t count) const;
  Clock::time_point lastHeld(std::size_t count) const;
  int finished() const { return finished_; }
  Clock::time_point lastFinished() const { return last_finished_; }
  int closed() const { return closed_; }
  int clockDone() const { return clock_done_; }
  int heartbeats() const { return heartbeats_; }

  const std::vector<AgentRecord>& records() const { return records_; }
  std::size_t size() const { return records_.size(); }

 private:
  struct Agent;
  enum Tag : std::uint8_t;

  void openConnection(std::size_t conn);
  void onReadable(std::size_t conn);
  void onWritable(std::size_t conn);
  void onReply(std::size_t agent, bool lease, std::uint8_t tag, std::string_view value);
  void prepareJoin(std::size_t agent);
  void onEvent(std::size_t agent, std::string_view text);
  void onRound(std::size_t agent, const proto::rendezvous::Event& event);
  void acknowledge(std::size_t agent);
  void awaitEvent(std::size_t agent);
  void flush(std::size_t conn);
  void beatDueAgents(Clock::time_point now);
  void pollOnce(Clock::time_point deadline);
  [[noreturn]] void connectionLost(std::size_t conn);
  std::string daemonEnded(const std::string& prefix) const;
  StorePipe& pipeOf(std::size_t conn);
  static std::string connectionName(std::size_t conn);
  std::chrono::nanoseconds beatSlot() const;
  Clock::time_point nextBeat() const;

  SwarmOptions options_;
  struct Loop;
  std::unique_ptr<Loop> loop_;
  std::vector<Agent> agents_;
  std::vector<AgentRecord> records_;
  std::vector<bool> armed_out_;   // per connection: EPOLLOUT is armed
  std::vector<bool> connecting_;  // per connection: its connect is under way

  int connected_ = 0;
  int syncs_ = 0;
  std::vector<int> holding_;  // [k]: agents holding more than k round events
  std::vector<Clock::time_point> last_held_;
  int finished_ = 0;
  Clock::time_point last_finished_{};
  int closed_ = 0;
  int clock_done_ = 0;
  int heartbeats_ = 0;
  Clock::time_point beats_from_{};  // when the heartbeat schedule started
  std::uint64_t beats_sent_ = 0;    // slots of the schedule served so far
  bool beating_ = false;
};

}  // namespace ddprun::bench

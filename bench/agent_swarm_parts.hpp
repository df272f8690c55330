// AgentSwarm's insides, shared by its two source files: agent_swarm.cpp
// (connections and the event loop) and agent_swarm_protocol.cpp (what the
// agents send and how they react). Not for other users.
#pragma once

#include <netinet/in.h>
#include <unistd.h>

#include <array>
#include <stdexcept>
#include <string>

#include "agent_swarm.hpp"
#include "nonblocking_socket.hpp"
#include "store_pipe.hpp"

namespace ddprun::bench {

namespace protocol = proto::rendezvous;

// A failure of the run, already in words: what the loop throws.
class SwarmFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What each reply answers.
enum AgentSwarm::Tag : std::uint8_t {
  kHandshake,  // the PING after VALIDATE
  kSync,       // the benchmark's PING after a request
  kBeat,       // a heartbeat's PING
  kClock,      // a clock query
  kWaitDone,   // the WAIT for the next event's key
  kEvent,      // the GET of that key
};

struct AgentSwarm::Agent {
  StorePipe lease;
  StorePipe events;
  std::string join;  // its encoded join, once the lease's own address is known
  std::int64_t next_event = 0;
  int clock_left = -1;  // clock queries still to make; -1: not started
  bool joined = false;
  bool dead = false;    // killed by the benchmark
  bool closed = false;  // told "closed": it has exited
  bool acks = false;    // its round offered acks, and SwarmOptions::ack_events asks for them
};

// The epoll set and what every agent sends alike.
struct AgentSwarm::Loop {
  Epoll epoll;
  sockaddr_in server{};
  std::uint32_t nonce = static_cast<std::uint32_t>(::getpid());  // as StoreClient's PING
  std::string clock_key = protocol::queryKey(protocol::kQueryClock);
  std::array<std::string, static_cast<std::size_t>(protocol::Verb::kAck) + 1> verb_keys;
  std::array<epoll_event, 1024> ready{};

  const std::string& key(protocol::Verb verb) { return verb_keys[static_cast<std::size_t>(verb)]; }
};

}  // namespace ddprun::bench

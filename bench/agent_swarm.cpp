// AgentSwarm's connections and event loop: connects with a window, writes
// what the agents queue, reads replies and hands them to the agents
// (agent_swarm_protocol.cpp), on the calling thread.
#include <sys/epoll.h>

#include <algorithm>
#include <cstring>

#include "agent_swarm_parts.hpp"
#include "format.hpp"

namespace ddprun::bench {
namespace {

using protocol::Verb;

double secondsOf(std::chrono::steady_clock::duration duration) {
  return std::chrono::duration<double>(duration).count();
}

}  // namespace

AgentSwarm::AgentSwarm(SwarmOptions options)
    : options_(std::move(options)), loop_(std::make_unique<Loop>()) {
  loop_->server = ipv4Address(options_.host, options_.port);
  for (std::size_t verb = 0; verb < loop_->verb_keys.size(); ++verb) {
    loop_->verb_keys[verb] = protocol::verbKey(options_.run_id, static_cast<Verb>(verb));
  }
  const auto count = static_cast<std::size_t>(options_.agents);
  agents_.resize(count);
  records_.resize(count);
  armed_out_.assign(2 * count, false);
  connecting_.assign(2 * count, false);
  const std::string pid = std::to_string(::getpid());
  for (std::size_t i = 0; i < count; ++i) {
    records_[i].id = "simhost" + std::to_string(i) + ":" + pid;
    // A port per agent (none listens: the workers never start), so that each
    // announced store differs and the round's store names node 0's alone.
    records_[i].store_port = static_cast<std::uint16_t>(1 + i % 65535);
  }
}

AgentSwarm::~AgentSwarm() = default;

void AgentSwarm::connectAll(Clock::time_point deadline) {
  const std::size_t total = 2 * agents_.size();
  const auto window = static_cast<std::size_t>(std::max(1, options_.connect_window));
  std::size_t started = 0;
  const auto in_flight = [&] { return started - static_cast<std::size_t>(connected_); };
  runUntil(
      "connecting",
      [&] {
        for (; started < total && in_flight() < window; ++started) {
          openConnection(started);
        }
        return connected_ == static_cast<int>(total);
      },
      [&] {
        return std::to_string(connected_) + " of " + std::to_string(total) +
               " connections answered";
      },
      deadline);
}

// Connection 2i is agent i's lease, 2i + 1 its events connection.
void AgentSwarm::openConnection(std::size_t conn) {
  StorePipe& pipe = pipeOf(conn);
  const std::uint32_t source =
      options_.source_addresses > 1 ? loopbackSource(conn, options_.source_addresses) : 0;
  pipe.attach(startConnect(loop_->server, source));
  connecting_[conn] = true;
  armed_out_[conn] = true;  // writable: connected (or failed)
  loop_->epoll.add(pipe.fd(), EPOLLOUT, conn);
}

// Writes what the connection holds; EPOLLOUT stays armed only while the
// socket is full.
void AgentSwarm::flush(std::size_t conn) {
  StorePipe& pipe = pipeOf(conn);
  bool pending = false;
  try {
    pending = pipe.flush();
  } catch (const std::exception&) {
    connectionLost(conn);  // the daemon reset it
  }
  if (pending != armed_out_[conn]) {
    armed_out_[conn] = pending;
    loop_->epoll.modify(pipe.fd(), EPOLLIN | (pending ? EPOLLOUT : 0u), conn);
  }
}

void AgentSwarm::runUntil(const std::string& phase, const std::function<bool()>& done,
                          const std::function<std::string()>& progress,
                          Clock::time_point deadline) {
  const Clock::time_point start = Clock::now();
  try {
    while (!done()) {
      if (Clock::now() >= deadline) {
        throw SwarmFailure("not done within " + formatNumber("%g", secondsOf(deadline - start)) +
                           " s (" + progress() + ")" + daemonEnded("; "));
      }
      pollOnce(deadline);
    }
  } catch (const SwarmFailure& failure) {
    throw SwarmFailure(phase + ": " + failure.what());
  }
}

// "<prefix>ddprund ended (signal 9)" once the daemon has ended, else "".
std::string AgentSwarm::daemonEnded(const std::string& prefix) const {
  const std::string how = options_.daemon_ended ? options_.daemon_ended() : "";
  return how.empty() ? "" : prefix + "ddprund ended (" + how + ")";
}

void AgentSwarm::pollOnce(Clock::time_point deadline) {
  Clock::time_point now = Clock::now();
  beatDueAgents(now);
  const Clock::time_point wake =
      std::min({deadline, nextBeat(), now + std::chrono::milliseconds(100)});
  const auto timeout = std::chrono::ceil<std::chrono::milliseconds>(wake - now).count();
  const int n = loop_->epoll.wait(loop_->ready, static_cast<int>(std::max<long long>(0, timeout)));
  for (int i = 0; i < n; ++i) {
    const epoll_event& event = loop_->ready[static_cast<std::size_t>(i)];
    const std::size_t conn = event.data.u64;
    if (event.events & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
      onReadable(conn);
    }
    if (event.events & EPOLLOUT) {
      onWritable(conn);
    }
  }
}

void AgentSwarm::onWritable(std::size_t conn) {
  StorePipe& pipe = pipeOf(conn);
  if (!pipe.open()) {
    return;  // closed by an earlier event of this batch
  }
  if (!connecting_[conn]) {
    flush(conn);
    return;
  }
  // A connect finished: hand-shake as StoreClient's constructor does.
  if (const int error = socketError(pipe.fd()); error != 0) {
    throw SwarmFailure("connecting agent " + records_[conn / 2].id + ": " + std::strerror(error));
  }
  connecting_[conn] = false;
  pipe.handshake(loop_->nonce, kHandshake);
  flush(conn);
}

void AgentSwarm::onReadable(std::size_t conn) {
  StorePipe& pipe = pipeOf(conn);
  if (!pipe.open() || connecting_[conn]) {
    return;  // closed by an earlier event of this batch; a failed connect: onWritable
  }
  const std::size_t agent = conn / 2;
  const bool lease = conn % 2 == 0;
  bool open = false;
  try {
    open = pipe.receive(
        [&](const PipeReply& reply) { onReply(agent, lease, reply.tag, reply.value); });
  } catch (const SwarmFailure&) {
    throw;
  } catch (const std::exception& error) {
    throw SwarmFailure("agent " + records_[agent].id + "'s " + connectionName(conn) + ": " +
                       error.what());
  }
  if (!open && pipe.open()) {
    connectionLost(conn);
  }
}

void AgentSwarm::connectionLost(std::size_t conn) {
  if (std::string ended = daemonEnded(""); !ended.empty()) {
    throw SwarmFailure(ended);
  }
  throw SwarmFailure("ddprund closed the " + connectionName(conn) + " of agent " +
                     records_[conn / 2].id);
}

StorePipe& AgentSwarm::pipeOf(std::size_t conn) {
  Agent& agent = agents_[conn / 2];
  return conn % 2 == 0 ? agent.lease : agent.events;
}

std::string AgentSwarm::connectionName(std::size_t conn) {
  return conn % 2 == 0 ? "lease" : "events connection";
}

int AgentSwarm::holding(std::size_t count) const {
  return count == 0                 ? static_cast<int>(agents_.size())
         : count <= holding_.size() ? holding_[count - 1]
                                    : 0;
}

AgentSwarm::Clock::time_point AgentSwarm::lastHeld(std::size_t count) const {
  return count >= 1 && count <= last_held_.size() ? last_held_[count - 1] : Clock::time_point{};
}

}  // namespace ddprun::bench

// What a node needs from a rendezvous backend, whatever the backend is: the
// next worker group (ranks, world, the workers' store, the attempt number),
// word that the running group is over, a restart request, and the end of the
// job. The Agent talks only to this interface. The program picks the
// implementation (standalone, static, c10d, etcd) from the flags with
// makeRendezvous() (app/rendezvous_backends.hpp): a new backend is one class
// implementing it and one entry in that file's kBackends table.
//
// Threads: nextGroup() runs on the agent's waiter thread and may block for as
// long as the backend's timeout; cancelWait() may be called from any thread
// and makes a blocked or later nextGroup() (or failureStands()) return soon;
// failureStands() runs on the waiter thread too; requestRestart() and
// abandon() run on the agent's loop; finishJob() on main's thread after the agent's
// loop has ended (no other call runs then). Callbacks given to watchGroup(),
// watchClock() and watchQuarantine() are called on the backend's own threads.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "ddprun/launcher/core/launch_config.hpp"
#include "ddprun/launcher/core/peer_channel.hpp"
#include "ddprun/launcher/core/run_result.hpp"

namespace ddprun::metrics {
class Exposition;
}

namespace ddprun::launcher {

// One attempt's worker group on this node, as the rendezvous decided it.
struct WorkerGroup {
  int attempt = 0;  // TORCHELASTIC_RESTART_COUNT: the same on every node of the group
  int group_rank = 0;
  int group_world_size = 1;
  int base_rank = 0;  // global rank of local rank 0
  int world_size = 1;
  std::string store_host;  // the workers' store: MASTER_ADDR and MASTER_PORT
  std::uint16_t store_port = 0;

  bool operator==(const WorkerGroup&) const = default;
};

// Where this agent's monotonic clock (CLOCK_MONOTONIC, steady_clock) stands
// against the rendezvous' own, measured over the network NTP-style: the
// rendezvous' clock = this agent's + offset, within +- round_trip. Lets the
// timelines of several hosts be laid on one clock without trusting the
// hosts' wall clocks.
struct ClockOffset {
  std::chrono::nanoseconds offset{0};
  std::chrono::nanoseconds round_trip{0};  // of the sample kept: the uncertainty
  // Whose clock: the same text on every node of one job ("c10d rendezvous at
  // node0:29400"), so offsets to different clocks are never mixed.
  std::string reference;

  bool operator==(const ClockOffset&) const = default;
};

// The rendezvous left this node's host out of the job for a while
// (quarantine): group failures that started on it reached quarantine_after.
// The node stands by as a spare meanwhile.
struct QuarantineNotice {
  std::string host;
  int failures = 0;                   // the group failures that started on this host
  std::chrono::milliseconds left{0};  // how long it still lasts, when told

  bool operator==(const QuarantineNotice&) const = default;
};

class Rendezvous {
 public:
  virtual ~Rendezvous() = default;

  // One line for the log: which rendezvous, where, and this node's part in it.
  virtual std::string describe() const = 0;

  // Blocks until this node's next worker group, with its store ready for it
  // (empty: attempts never share keys). Called once before the first attempt
  // and once before every later one. nullopt: the job ended elsewhere, or
  // cancelWait() was called. Throws Error with one line naming what never
  // came (a node, a round, the store) when the backend's timeout passes.
  virtual std::optional<WorkerGroup> nextGroup() = 0;

  // Any thread: a blocked nextGroup() returns nullopt soon, later ones at once.
  virtual void cancelWait() = 0;

  // True when nextGroup() never waits for anyone (one node): the agent then
  // asks on its own loop and saves a thread per attempt.
  virtual bool answersAtOnce() const { return false; }

  // `over` is called (on a backend thread) with a newer attempt number when
  // the running group is over because the membership changed; an empty
  // function unregisters, and once that returns no call is running. Fixed
  // memberships never call it.
  // NOLINTNEXTLINE(performance-unnecessary-value-param): by value: the overrides keep it
  virtual void watchGroup(std::function<void(int newer_attempt)> over) { (void)over; }

  // `measured` is called with each measurement of this agent's clock against
  // the rendezvous' (on joining, and again on each later join, which may
  // reach another rendezvous host): from a backend thread, or at once for a
  // value known already; an empty function unregisters, and once that
  // returns no call is running. Backends without a clock to ask (etcd)
  // never call it.
  // NOLINTNEXTLINE(performance-unnecessary-value-param): by value: the overrides keep it
  virtual void watchClock(std::function<void(const ClockOffset&)> measured) { (void)measured; }

  // `told` is called (on a backend thread) each time the rendezvous
  // quarantines this node's host; an empty function unregisters, and once
  // that returns no call is running. Backends without quarantine (static,
  // standalone) never call it.
  // NOLINTNEXTLINE(performance-unnecessary-value-param): by value: the overrides keep it
  virtual void watchQuarantine(std::function<void(const QuarantineNotice&)> told) { (void)told; }

  // This node's workers failed and it will restart them (a counted
  // restart): tell the others. `cause` is the failure that starts it, for
  // backends that keep it where the job's status can be read.
  virtual void requestRestart(const WorkerFailure& cause) { (void)cause; }

  // This node's workers failed in `attempt`. Workers often fail first when a
  // peer node dies (their connections reset), before the backend has said
  // the group is over. Blocks (on the agent's waiter thread, at most about
  // the keep-alive bound) until the backend knows: false when a node of the
  // group was lost (or, unless `restart_asked`, the group was already over),
  // so the failure was the lost node's and the agent joins the next group
  // without counting a restart; true when it stands. `restart_asked`: this
  // agent asked for a restart (requestRestart), which moves the group on by
  // itself; backends that cannot tell a loss apart from that answer true.
  // cancelWait() makes it return soon.
  virtual bool failureStands(int attempt, bool restart_asked) {
    (void)attempt;
    (void)restart_asked;
    return true;
  }

  // A line to the other agents of `group` while it runs (peer_channel.hpp);
  // nullptr where there are none (one node) or the backend has no way to
  // reach them. Called on the agent's loop when the group starts; opening
  // contacts nobody yet.
  virtual std::unique_ptr<PeerChannel> openPeerChannel(const WorkerGroup& group) {
    (void)group;
    return nullptr;
  }

  // The agent is about to vanish without ending the job (ddprun's guardian
  // died: `kill -9` of ddprun's pid): tell the others at once where the
  // backend can, rather than leave them to notice the silence. c10d needs
  // nothing (the connection closes with the process). Called on the agent's
  // loop, right before it exits; bounded to about a second.
  virtual void abandon() {}

  // The run is over on this node: ends the job as the backend must (the exit
  // barrier, closing or aborting it for the others) and returns this agent's
  // exit status, which is never 0 unless result.exit_code is 0 and the job
  // did not fail elsewhere.
  virtual int finishJob(const RunResult& result) = 0;

  // The families of the rendezvous daemon this agent hosts (c10d's embedded
  // ddprund), for the agent's metrics endpoint; nothing when it hosts none.
  // Any thread (the endpoint's), while the backend lives.
  virtual void collectMetrics(metrics::Exposition& out) const { (void)out; }
};

// What a backend needs besides the flags.
struct NodeInfo {
  int nproc = 1;         // workers on this node, resolved (gpu/cpu/auto counted)
  std::string hostname;  // for messages and the agent's id
};

}  // namespace ddprun::launcher

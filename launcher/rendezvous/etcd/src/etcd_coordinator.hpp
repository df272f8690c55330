// The coordinator of an etcd rendezvous: one agent, elected through etcd,
// decides the rounds with the same socket-free state machine the c10d daemon
// runs (rdzv::ElasticRendezvous), and writes each decision to the state key
// in a transaction on the revision it read, fenced by its own election key:
// a deposed coordinator's write fails instead of overwriting its
// successor's.
//
// Every agent runs one; all but the elected one wait for the election key to
// go (its holder's lease expired or was revoked) and then campaign. The one
// elected rebuilds the state machine from etcd: the last decided round, and
// which of its members still hold their membership keys (they continue it,
// or re-form without the lost ones at once), then follows the view: a new
// membership key is a join, a deleted one a loss (liveness is the members'
// leases, so the machine's own keep-alive clock never expires anyone), a
// restart key for the running round a restart (in etcd's commit order: the
// first one's host is blamed for the failure), the closed key the end. The
// machine's quarantines go into each round's state; a coordinator elected
// later starts with none (they live in the deposed one's memory).
//
// The state lives on the run's lease, not on an agent's: the first write
// grants it, later ones keep it, and every agent renews it with its own
// (EtcdLease's `shared`). So it outlives any one agent, coordinators
// included, and ends one TTL after the job's last agent: a job killed whole
// leaves nothing for a new job of the same run id to number its rounds on
// from (as torchrun's etcd rendezvous, whose state keys carry a TTL).
//
// Owns its thread (campaign, then lead); it only reads the view and writes
// to etcd. Destruction stops and joins it; the election key goes with the
// agent's lease.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "ddprun/launcher/etcd/etcd_records.hpp"
#include "ddprun/rendezvous/elastic_rendezvous.hpp"
#include "etcd_view.hpp"

namespace ddprun::launcher::etcd_rdzv {

class EtcdCoordinator {
 public:
  // `lease()` is the agent's lease now (it changes when the agent had to
  // register again); `state_ttl` the run's lease's, granted with the first
  // state. `retry` paces attempts while etcd is unavailable.
  EtcdCoordinator(etcd::Client& client, EtcdView& view, Keys keys, std::string agent_id,
                  rdzv::ElasticSettings settings, std::function<std::int64_t()> lease,
                  std::chrono::seconds state_ttl, std::chrono::milliseconds retry);
  ~EtcdCoordinator();
  EtcdCoordinator(const EtcdCoordinator&) = delete;
  EtcdCoordinator& operator=(const EtcdCoordinator&) = delete;

  // Whether this agent coordinates now (for messages and tests).
  bool leading() const { return leading_.load(); }

 private:
  using Clock = std::chrono::steady_clock;

  void run();
  std::optional<std::int64_t> campaign();
  void lead(std::int64_t election_revision);
  void restore(rdzv::ElasticRendezvous& machine, const EtcdView::Snapshot& snapshot,
               rdzv::Events& events);
  void follow(rdzv::ElasticRendezvous& machine, const EtcdView::Snapshot& snapshot,
              rdzv::Events& events);
  bool stillElected(const EtcdView::Snapshot& snapshot) const;
  std::int64_t stateLease(const EtcdView::Snapshot& snapshot);
  void prepareStateLease();
  bool preparedLeaseFresh() const;
  std::chrono::milliseconds preparedLeasePeriod() const;
  void renewUsedPreparedLease(std::int64_t used);
  bool write(const rdzv::Events& events, const EtcdView::Snapshot& snapshot,
             const rdzv::ElasticRendezvous& machine);
  void waitForView(std::int64_t revision);
  void pause();
  void pauseUntilStopped();

  etcd::Client& client_;
  EtcdView& view_;
  Keys keys_;
  std::string agent_id_;
  rdzv::ElasticSettings settings_;
  std::function<std::int64_t()> lease_;
  std::chrono::seconds state_ttl_;
  std::chrono::milliseconds retry_;

  // The lead's bookkeeping (the coordinator's thread only).
  std::int64_t election_revision_ = 0;  // the create revision of our election key
  std::int64_t state_revision_ = 0;     // the state key's mod revision we wrote or read
  bool first_round_pending_ = false;    // no state was ever written in this run
  std::map<std::string, std::int64_t> restarts_seen_;  // restart key -> its mod revision seen
  std::map<std::string, std::int64_t> joined_at_;      // member -> its key's create revision
  std::int64_t prepared_lease_ = 0;                    // the first state's, granted ahead
  Clock::time_point prepared_at_;                      // when it was granted

  std::atomic<bool> leading_{false};
  std::atomic<bool> stopping_{false};
  std::mutex pause_mutex_;
  std::condition_variable pause_;
  std::thread thread_;
};

}  // namespace ddprun::launcher::etcd_rdzv

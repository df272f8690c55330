// An elastic job whose rendezvous lives in etcd (--rdzv-backend=etcd-v3, and
// torchrun's etcd and etcd-v2 spellings: every agent of a job is ddprun, so
// the keys are ddprun's own), so it survives losing any one machine: an
// agent's, the coordinator's, or an etcd member's.
//
// Every agent holds a lease (keep_alive_interval x keep_alive_max_attempt)
// and its membership key under it; one agent, elected through etcd, decides
// the rounds (EtcdCoordinator); every agent learns them from its watch
// (EtcdView). The workers' store is as with c10d: each agent binds one and
// announces it, and node 0 of each round serves it, emptied, and says so
// (the ready key) before the other nodes start their workers. Key layout and
// records: etcd_records.hpp; the rules: docs/rendezvous-protocol.md.
//
// Owns the etcd client, the lease (its thread), the view (its watch thread),
// the coordinator (its thread) and the workers' store server. As a
// Rendezvous its calls come as rendezvous.hpp says; the watch thread calls
// the watchGroup() callback. Restart requests go out on a thread of their
// own, so the agent's loop never waits on etcd.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "ddprun/launcher/core/rendezvous.hpp"
#include "ddprun/launcher/etcd/etcd_client.hpp"
#include "ddprun/launcher/etcd/etcd_records.hpp"

namespace ddprun::rdzv {
class Server;
}

namespace ddprun::launcher {

namespace etcd_rdzv {
class EtcdLease;
class EtcdView;
class EtcdCoordinator;
class EtcdLeaseWatch;
}  // namespace etcd_rdzv

// The etcd client's settings from the flags: the members of --rdzv-endpoint,
// and protocol, cacert (ca_cert), cert (ssl_cert), key (ssl_cert_key) and
// read_timeout of --rdzv-conf. Throws ConfigError naming a bad value.
etcd::ClientOptions etcdClientOptions(const LaunchConfig& config);

class EtcdRendezvous final : public Rendezvous {
 public:
  // Binds the workers' store; contacts nobody.
  EtcdRendezvous(const LaunchConfig& config, const NodeInfo& node);
  ~EtcdRendezvous() override;

  std::string describe() const override;
  std::optional<WorkerGroup> nextGroup() override;
  // Over the workers' store (StorePeerChannel), when the group has other nodes.
  std::unique_ptr<PeerChannel> openPeerChannel(const WorkerGroup& group) override;
  void cancelWait() override;
  void watchGroup(std::function<void(int newer_attempt)> over) override;
  void watchQuarantine(std::function<void(const QuarantineNotice&)> told) override;
  void requestRestart(const WorkerFailure& cause) override;
  bool failureStands(int attempt, bool restart_asked) override;
  // Revokes this agent's lease, so the others re-form now, not after the TTL.
  void abandon() override;
  int finishJob(const RunResult& result) override;

 private:
  struct Decision;
  bool join();
  std::unique_ptr<etcd_rdzv::EtcdView> viewFromServingMember(
      std::unique_ptr<etcd_rdzv::EtcdView> early, std::chrono::milliseconds retry);
  void registerMember(std::int64_t lease);
  Decision decide();
  std::int64_t stateLease();
  void serveStoreAsNodeZero(std::int64_t round);
  std::string waitingFor();
  void onViewChange();
  enum class Barrier { kAllDone, kRoundMoved, kClosed, kTimedOut };
  Barrier exitBarrier(std::chrono::milliseconds timeout);
  void reportSuccess(std::int64_t round, std::chrono::steady_clock::time_point deadline);
  // nullopt: not decided yet. `snapshot` is the view's (EtcdView::Snapshot).
  std::optional<Barrier> barrierOutcome(const std::map<std::string, etcd::KeyValue>& snapshot,
                                        std::int64_t round) const;
  bool closeJob(bool failed);
  int endedElsewhere(const RunResult& result);
  void leave();
  // Quarantine (etcd_quarantine.cpp), on the waiter thread: whether `state`
  // leaves this host out, saying so the first time a round does.
  bool quarantinedBy(const etcd_rdzv::StateRecord& state);
  std::string describeQuarantine() const;

  LaunchConfig config_;
  std::string agent_id_;
  std::string host_;  // this agent's host, as quarantines name it
  int local_world_size_ = 1;
  std::unique_ptr<etcd_rdzv::Keys> keys_;
  etcd::Client client_;
  std::unique_ptr<rdzv::Server> worker_store_;
  std::string store_host_;
  std::unique_ptr<etcd_rdzv::EtcdLease> lease_;
  std::unique_ptr<etcd_rdzv::EtcdView> view_;
  std::unique_ptr<etcd_rdzv::EtcdCoordinator> coordinator_;
  std::unique_ptr<etcd_rdzv::EtcdLeaseWatch> lease_watch_;

  std::atomic<bool> cancelled_{false};
  std::mutex wait_mutex_;                // guards view_'s creation against cancelWait()
  std::condition_variable wait_;         // join()'s pause between tries; cancelWait() ends it
  std::atomic<bool> view_ready_{false};  // view_ is set: the watch thread may read it
  bool joined_ = false;
  std::atomic<std::int64_t> returned_{-1};  // the round nextGroup() returned last
  std::atomic<std::int64_t> lease_id_{0};   // this agent's lease now, for abandon()
  std::int64_t store_round_ = -1;           // the round our workers' store was emptied for
  bool was_member_ = false;

  // The round whose state last quarantined this host, and when this agent
  // read it; `left_out_`: no round for this node since.
  std::int64_t quarantine_round_ = -1;
  std::optional<etcd_rdzv::QuarantineRecord> quarantine_;
  std::chrono::steady_clock::time_point quarantine_seen_;
  std::atomic<bool> left_out_{false};
  std::mutex quarantine_watch_mutex_;  // held while quarantine_watch_ runs
  std::function<void(const QuarantineNotice&)> quarantine_watch_;

  std::mutex notify_mutex_;  // held while over_ runs
  std::function<void(int)> over_;
  std::int64_t over_told_ = -1;  // the newest round over_ was told of

  std::mutex requests_mutex_;
  std::vector<std::thread> requests_;
};

}  // namespace ddprun::launcher

// An elastic job across nodes (--rdzv-backend=c10d, --nnodes MIN:MAX): the
// rounds are decided by a ddprund at --rdzv-endpoint, embedded in this agent
// when the endpoint is this host's (or is_host=1), and pushed to every agent
// (ElasticMembership). Each agent binds a workers' store and announces it
// when it joins; node 0's serves the round (its thread starts the first time
// the node is node 0), and is emptied when a new round starts.
//
// Owns the embedded daemon (if any), the workers' store server and the
// membership. As a Rendezvous its calls come as rendezvous.hpp says; the
// membership's own threads call the watchGroup() callback, and its lease
// thread may start hosting the rendezvous here when the old host was lost.
#pragma once

#include <atomic>
#include <memory>

#include "ddprun/launcher/core/rendezvous.hpp"
#include "ddprun/launcher/rendezvous/elastic_membership.hpp"

namespace ddprun::rdzv {
class Server;
}

namespace ddprun::launcher {

class C10dRendezvous final : public Rendezvous {
 public:
  // Hosts the daemon if this agent is where the endpoint is (binding decides:
  // it fails on another host's address, or where a ddprund already serves),
  // and starts the workers' store. Contacts nobody.
  C10dRendezvous(const LaunchConfig& config, const NodeInfo& node);
  ~C10dRendezvous() override;

  std::string describe() const override;
  std::optional<WorkerGroup> nextGroup() override;
  // Over the workers' store (StorePeerChannel), when the group has other nodes.
  std::unique_ptr<PeerChannel> openPeerChannel(const WorkerGroup& group) override;
  void cancelWait() override { membership_->cancelWait(); }
  void watchGroup(std::function<void(int newer_attempt)> over) override;
  // Measured by the membership's lease thread after each join.
  void watchClock(std::function<void(const ClockOffset&)> measured) override {
    membership_->watchClock(std::move(measured));
  }
  void watchQuarantine(std::function<void(const QuarantineNotice&)> told) override;
  void requestRestart(const WorkerFailure& cause) override;
  bool failureStands(int attempt, bool restart_asked) override;
  // After a success: the exit barrier, then the run is closed. After a
  // failure: the run is aborted, so every other agent stops too. After a
  // signal: the run is left open for a replacement, as torchrun does. A
  // node quarantined until the job ended: kUnfitExitCode.
  int finishJob(const RunResult& result) override;
  void collectMetrics(metrics::Exposition& out) const override;

 private:
  // How the job ended here: this node's exit status, and whether the run is
  // closed (every agent told, or being told, that the job is over).
  struct JobEnd {
    int exit_code = 1;
    bool run_closed = false;
  };

  void hostRendezvousIfHere();
  JobEnd closeJob(const RunResult& result);
  int endedElsewhere(const RunResult& result);
  void lingerWhileOthersConnected();

  std::string endpoint_;
  std::optional<bool> is_host_;
  std::string host_;  // the endpoint's host and port
  std::uint16_t port_ = 0;
  std::string agent_id_;
  std::string token_;
  std::string run_id_;
  std::chrono::milliseconds keep_alive_bound_{15'000};
  std::unique_ptr<rdzv::Server> daemon_;        // the embedded ddprund, if this agent hosts
  std::atomic<rdzv::Server*> hosted_{nullptr};  // daemon_, for the metrics' thread
  std::unique_ptr<rdzv::Server> worker_store_;  // serves the workers when this node is node 0
  std::unique_ptr<ElasticMembership> membership_;
  bool joined_ = false;
  std::int64_t store_round_ = -1;  // the round the workers' store was last emptied for
};

}  // namespace ddprun::launcher

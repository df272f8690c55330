// What `ddprun status` is told about one run beyond what ElasticRendezvous
// decides: each agent's workers and restarts (from its join and its
// reports), the agents lost and why (the last kMaxLosses only, so memory
// stays bounded however long the job runs), the last failure an agent
// reported, the counted restarts asked for, and when the last round was
// decided. Times are the rendezvous' monotonic clock.
//
// Socket-free and clock-free (every call takes `now`). Owned by one run of
// the RendezvousService and driven, like it, under the store lock.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "ddprun/proto/rendezvous_protocol.hpp"
#include "ddprun/proto/rendezvous_status.hpp"

namespace ddprun::rdzv {

class JobRecord {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::size_t kMaxLosses = 16;

  // A live agent, as its join and reports describe it.
  struct Profile {
    int local_world_size = 1;
    std::optional<int> max_restarts;  // unknown for an older agent
    int restarts_used = 0;
  };
  struct Loss {
    std::string agent;
    std::int64_t round = 0;
    bool was_member = true;
    proto::rendezvous::LossReason reason = proto::rendezvous::LossReason::kConnectionClosed;
    Clock::time_point when;
  };
  struct Failure {
    std::string agent;
    proto::rendezvous::WorkerFailureReport report;
    bool ended_job = false;
    Clock::time_point when;
  };

  // An agent was placed (member, spare, or back in a round).
  void joined(const proto::rendezvous::JoinRequest& join);
  // A restart (ended_job false) or an abort (true) from `report.agent`. The
  // restart counts; the failure becomes the last one when it is from a newer
  // round than the last (the first report of a round is its root cause).
  void reported(const proto::rendezvous::AgentReport& report, bool ended_job,
                Clock::time_point now);
  // The rendezvous lost `agent` from `round`; its profile goes with it.
  void lost(const std::string& agent, std::int64_t round, bool was_member,
            proto::rendezvous::LossReason reason, Clock::time_point now);
  // A round was decided (completed, or restored as it was).
  void roundDecided(Clock::time_point now) { round_decided_at_ = now; }

  const Profile* profile(std::string_view agent) const;
  const std::deque<Loss>& losses() const { return losses_; }  // newest first
  const std::optional<Failure>& lastFailure() const { return last_failure_; }
  int restarts() const { return restarts_; }
  std::optional<Clock::time_point> roundDecidedAt() const { return round_decided_at_; }

 private:
  std::map<std::string, Profile, std::less<>> profiles_;
  std::deque<Loss> losses_;
  std::optional<Failure> last_failure_;
  int restarts_ = 0;
  std::optional<Clock::time_point> round_decided_at_;
};

}  // namespace ddprun::rdzv

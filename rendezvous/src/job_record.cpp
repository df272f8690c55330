#include "ddprun/rendezvous/job_record.hpp"

#include <utility>

namespace ddprun::rdzv {

void JobRecord::joined(const proto::rendezvous::JoinRequest& join) {
  profiles_[join.agent] = {join.local_world_size, join.max_restarts, join.restarts_used};
}

void JobRecord::reported(const proto::rendezvous::AgentReport& report, bool ended_job,
                         Clock::time_point now) {
  if (!ended_job) {
    ++restarts_;
    if (const auto it = profiles_.find(report.agent); it != profiles_.end()) {
      // An older agent says nothing: this restart is one more of its own.
      it->second.restarts_used = report.restarts_used.value_or(it->second.restarts_used + 1);
    }
  }
  if (report.failure && (!last_failure_ || report.failure->round > last_failure_->report.round)) {
    last_failure_ = Failure{report.agent, *report.failure, ended_job, now};
  }
}

void JobRecord::lost(const std::string& agent, std::int64_t round, bool was_member,
                     proto::rendezvous::LossReason reason, Clock::time_point now) {
  profiles_.erase(agent);
  losses_.push_front({agent, round, was_member, reason, now});
  if (losses_.size() > kMaxLosses) {
    losses_.pop_back();
  }
}

const JobRecord::Profile* JobRecord::profile(std::string_view agent) const {
  const auto it = profiles_.find(agent);
  return it == profiles_.end() ? nullptr : &it->second;
}

}  // namespace ddprun::rdzv

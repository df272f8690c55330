#include "ddprun/launcher/observe/status_table.hpp"

#include <algorithm>
#include <cstdio>

#include "ddprun/proto/visible_text.hpp"

namespace ddprun::launcher {
namespace {

namespace protocol = proto::rendezvous;
using proto::visible;
using protocol::JobState;

std::string ago(std::int64_t milliseconds) { return describeDuration(milliseconds) + " ago"; }

std::string nnodes(int min_nodes, int max_nodes) {
  return min_nodes == max_nodes ? std::to_string(min_nodes)
                                : std::to_string(min_nodes) + ":" + std::to_string(max_nodes);
}

std::string describeState(const protocol::JobStatus& status) {
  switch (status.state) {
    case JobState::kForming:
      return "forming: waiting for nodes to join";
    case JobState::kRunning:
      return "running";
    case JobState::kSuspended:
      return "suspended: fewer nodes than --nnodes' minimum, waiting for nodes";
    case JobState::kRestoring:
      return "restoring: the members of round " + std::to_string(status.round) +
             " are rejoining a restarted rendezvous";
    case JobState::kClosed:
      return "closed: the job is over";
    case JobState::kFailed:
      return "failed: the restarts of " + status.failed_on.value_or("an agent") + " were spent";
  }
  return "unknown";
}

// A running (or ended) job's round was decided when the last round was; a
// forming or suspended one's is still awaited.
std::string describeRound(const protocol::JobStatus& status) {
  const bool decided = status.state != JobState::kForming && status.state != JobState::kSuspended &&
                       status.state != JobState::kRestoring;
  std::string text = std::to_string(status.round);
  if (!status.since_round_ms) {
    return text + " (none decided yet)";
  }
  if (decided) {
    return text + ", decided " + ago(*status.since_round_ms);
  }
  return text + " (not decided yet; the last one was " + ago(*status.since_round_ms) + ")";
}

std::string describeRestarts(const protocol::JobStatus& status) {
  std::string text = std::to_string(status.restarts_used) + " used";
  if (status.restarts_left) {
    text += ", " + std::to_string(*status.restarts_left) + " left";
  }
  return text;
}

std::string describeFailure(const protocol::JobStatus& status) {
  if (!status.last_failure) {
    return "none";
  }
  const protocol::FailureStatus& last = *status.last_failure;
  const protocol::WorkerFailureReport& failure = last.failure;
  return "rank " + std::to_string(failure.rank) + " (local rank " +
         std::to_string(failure.local_rank) + ", pid " + std::to_string(failure.pid) + ") on " +
         last.host + " (" + last.agent + "), round " + std::to_string(failure.round) + ": " +
         failure.reason + (last.ended_job ? "; it ended the job" : "") + ", " + ago(last.ago_ms);
}

// Each quarantined host, with why and how long it still lasts.
std::string describeQuarantined(const protocol::JobStatus& status) {
  std::string text;
  for (const protocol::HostQuarantine& host : status.quarantined) {
    text += (text.empty() ? "" : "; ") + host.host + " (" + std::to_string(host.failures) +
            " group failure(s) started there; " + describeDuration(host.left_ms) + " left)";
  }
  return text.empty() ? "none" : text;
}

bool quarantined(const protocol::JobStatus& status, const std::string& host) {
  return std::any_of(status.quarantined.begin(), status.quarantined.end(),
                     [&](const protocol::HostQuarantine& each) { return each.host == host; });
}

std::string describeLoss(const protocol::LossStatus& loss) {
  std::string why;
  switch (loss.reason) {
    case protocol::LossReason::kConnectionClosed:
      why = "its connection closed (the agent exited or was killed)";
      break;
    case protocol::LossReason::kNoHeartbeat:
      why = "no heartbeat within the keep-alive timeout";
      break;
    case protocol::LossReason::kLeft:
      why = "it left (stopped by a signal)";
      break;
  }
  return loss.was_member ? why : why + "; it was a spare";
}

std::string ranks(const protocol::MemberStatus& member) {
  if (!member.base_rank) {
    return "-";
  }
  const int last = *member.base_rank + member.local_world_size - 1;
  return last == *member.base_rank ? std::to_string(last)
                                   : std::to_string(*member.base_rank) + "-" + std::to_string(last);
}

std::vector<std::string> memberRow(const protocol::MemberStatus& member,
                                   const protocol::JobStatus& status) {
  std::string state(protocol::memberStateName(member.state));
  if (member.state == protocol::MemberState::kSpare && quarantined(status, member.host)) {
    state += ", quarantined";
  }
  if (!member.connected) {
    state += ", disconnected";
  }
  std::string restarts = std::to_string(member.restarts_used);
  if (member.max_restarts) {
    restarts += "/" + std::to_string(*member.max_restarts);
  }
  return {member.node_rank ? std::to_string(*member.node_rank) : "-",
          member.agent,
          member.host,
          ranks(member),
          state,
          restarts,
          member.heard_ms ? ago(*member.heard_ms) : "-"};
}

std::string membersTable(const std::vector<protocol::MemberStatus>& members,
                         const protocol::JobStatus& status) {
  std::vector<std::vector<std::string>> rows = {
      {"NODE", "AGENT", "HOST", "RANKS", "STATE", "RESTARTS", "HEARD"}};
  for (const protocol::MemberStatus& member : members) {
    rows.push_back(memberRow(member, status));
  }
  return alignColumns(rows);
}

std::string lossesTable(const std::vector<protocol::LossStatus>& losses) {
  std::vector<std::vector<std::string>> rows = {{"AGENT", "HOST", "ROUND", "WHEN", "WHY"}};
  for (const protocol::LossStatus& loss : losses) {
    rows.push_back(
        {loss.agent, loss.host, std::to_string(loss.round), ago(loss.ago_ms), describeLoss(loss)});
  }
  return alignColumns(rows);
}

}  // namespace

std::string describeDuration(std::int64_t milliseconds) {
  milliseconds = std::max<std::int64_t>(milliseconds, 0);
  if (milliseconds < 1000) {
    return std::to_string(milliseconds) + " ms";
  }
  if (milliseconds < 60'000) {
    char text[32];
    std::snprintf(text, sizeof(text), "%.1f s", static_cast<double>(milliseconds) / 1000.0);
    return text;
  }
  const std::int64_t seconds = milliseconds / 1000;
  if (seconds < 3600) {
    return std::to_string(seconds / 60) + " min " + std::to_string(seconds % 60) + " s";
  }
  return std::to_string(seconds / 3600) + " h " + std::to_string(seconds % 3600 / 60) + " min";
}

std::string alignColumns(const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::vector<std::string>> shown;  // each cell as visible() shows it
  for (const auto& row : rows) {
    shown.emplace_back();
    for (const std::string& cell : row) {
      shown.back().push_back(visible(cell));
    }
  }
  std::vector<std::size_t> widths;
  for (const auto& row : shown) {
    widths.resize(std::max(widths.size(), row.size()), 0);
    for (std::size_t i = 0; i < row.size(); ++i) {
      widths[i] = std::max(widths[i], row[i].size());
    }
  }
  std::string text;
  for (const auto& row : shown) {
    std::string line;
    for (std::size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) {
        line.append(widths[i] - row[i].size() + 2, ' ');
      }
    }
    line.erase(line.find_last_not_of(' ') + 1);
    text += line + "\n";
  }
  return text;
}

std::string formatJobStatus(const protocol::JobStatus& status, std::string_view endpoint) {
  const std::string served_by = status.rendezvous_host.empty()
                                    ? "ddprund"
                                    : "the agent " + status.rendezvous_host + ", embedded";
  std::string text = "rendezvous '" + visible(status.run_id) + "' at " + visible(endpoint) + " (" +
                     visible(served_by) + ")\n";
  text += alignColumns({
      {"  state:", describeState(status)},
      {"  round:", describeRound(status)},
      {"  nodes:", std::to_string(status.members.size()) + " (--nnodes " +
                       nnodes(status.min_nodes, status.max_nodes) + "), world size " +
                       std::to_string(status.world_size)},
      {"  restarts:", describeRestarts(status)},
      {"  last failure:", describeFailure(status)},
      {"  quarantined:", describeQuarantined(status)},
  });
  text += "\nmembers:\n";
  text += status.members.empty() ? "  none\n" : membersTable(status.members, status);
  text += "\nspares:";
  text += status.spares.empty() ? " none\n" : "\n" + membersTable(status.spares, status);
  text += "\nlost (newest first):";
  text += status.losses.empty() ? " none\n" : "\n" + lossesTable(status.losses);
  return text;
}

std::string formatJobList(const std::vector<protocol::JobSummary>& jobs, std::string_view endpoint,
                          std::optional<std::int64_t> total) {
  if (jobs.empty() && total.value_or(0) == 0) {
    return "no c10d rendezvous runs at " + visible(endpoint) + "\n";
  }
  std::vector<std::vector<std::string>> rows = {
      {"RUN ID", "STATE", "ROUND", "NODES", "SPARES", "WORLD", "LAST ROUND"}};
  for (const protocol::JobSummary& job : jobs) {
    rows.push_back({job.run_id, std::string(protocol::jobStateName(job.state)),
                    std::to_string(job.round), std::to_string(job.members),
                    std::to_string(job.spares), std::to_string(job.world_size),
                    job.since_round_ms ? ago(*job.since_round_ms) : "-"});
  }
  std::string text = alignColumns(rows);
  if (total && *total > static_cast<std::int64_t>(jobs.size())) {
    text += "(" + std::to_string(jobs.size()) + " of the " + std::to_string(*total) +
            " runs it holds, open ones first: --rdzv-id ID shows any one)\n";
  }
  return text;
}

}  // namespace ddprun::launcher

#include "ddprun/launcher/observe/torch_events.hpp"

#include "ddprun/launcher/core/write_all.hpp"

namespace ddprun::launcher {
namespace {

using Clock = AgentEvents::Clock;

// When `at` happened by the wall clock, in milliseconds since the epoch:
// torchrun's Event.timestamp unit (torchrun leaves it 0; ddprun fills it).
long long wallMilliseconds(Clock::time_point at) {
  const auto wall = std::chrono::system_clock::now() - (Clock::now() - at);
  return std::chrono::duration_cast<std::chrono::milliseconds>(wall.time_since_epoch()).count();
}

double milliseconds(Clock::duration duration) {
  return std::chrono::duration<double, std::milli>(duration).count();
}

}  // namespace

TorchEventLog::TorchEventLog(Job job, int fd) : job_(std::move(job)), fd_(fd) {}

void TorchEventLog::roundJoined(const WorkerGroup& group, Clock::duration waited,
                                Clock::time_point at) {
  group_ = group;
  write(event("RENDEZVOUS", {}, nullptr, milliseconds(waited), at));
}

void TorchEventLog::workerStarted(int local_rank, int rank, pid_t pid, Clock::time_point at) {
  write(event("STARTED", {local_rank, rank, pid}, nullptr, nullptr, at));
}

void TorchEventLog::workerExited(int local_rank, int rank, pid_t pid, const ExitStatus& status,
                                 bool failed, Clock::time_point at) {
  // torchrun's _get_worker_state: a worker the agent stopped is TERMINATED.
  const char* state = failed ? "FAILED" : status.success() ? "SUCCEEDED" : "TERMINATED";
  const Json raw_error = failed ? Json(status.describe()) : Json(nullptr);
  write(event(state, {local_rank, rank, pid}, raw_error, nullptr, at));
}

void TorchEventLog::workerHung(int local_rank, int rank, const std::string& reason,
                               const std::string& /*where*/, Clock::time_point at) {
  write(event("UNHEALTHY", {local_rank, rank, 0}, reason, nullptr, at));
}

void TorchEventLog::restarting(int restarts_used, int /*max_restarts*/, Clock::time_point at) {
  restarts_used_ = restarts_used;
  write(event("RESTARTING", {}, nullptr, nullptr, at));
}

void TorchEventLog::finished(int exit_code, Clock::time_point at) {
  const bool succeeded = exit_code == 0;
  const Json raw_error =
      succeeded ? Json(nullptr) : Json("ddprun exits with status " + std::to_string(exit_code));
  write(event(succeeded ? "SUCCEEDED" : "FAILED", {}, raw_error, nullptr, at));
}

// The fields and their order are torchrun's (SimpleElasticAgent._construct_event).
TorchEventLog::Json TorchEventLog::event(std::string_view state, const Worker& worker,
                                         const Json& raw_error, const Json& duration_ms,
                                         Clock::time_point at) const {
  const bool of_worker = worker.local_rank >= 0;
  Json inner = {{"group_world_size", group_.group_world_size}, {"entry_point", job_.entry_point}};
  if (of_worker) {
    // One-element lists, as torchrun's tuples serialise.
    inner["local_rank"] = {worker.local_rank};
    inner["role_rank"] = {worker.rank};
    inner["role_world_size"] = {group_.world_size};
  }
  Json metadata = {
      {"run_id", job_.run_id},
      {"global_rank", of_worker ? Json(worker.rank) : Json(nullptr)},
      {"group_rank", group_.group_rank},
      {"worker_id", of_worker && worker.pid > 0 ? Json(std::to_string(worker.pid)) : Json(nullptr)},
      {"role", job_.role},
      {"hostname", job_.host},
      {"state", state},
      {"total_run_time", std::chrono::duration_cast<std::chrono::seconds>(at - started_).count()},
      {"rdzv_backend", job_.rdzv_backend},
      {"raw_error", raw_error},
      {"metadata", inner.dump()},
      {"agent_restarts", restarts_used_},
      {"duration_ms", duration_ms},
  };
  return Json{{"name", "torchelastic.worker.status." + std::string(state)},
              {"source", of_worker ? "WORKER" : "AGENT"},
              {"timestamp", wallMilliseconds(at)},
              {"metadata", std::move(metadata)}};
}

void TorchEventLog::write(const Json& event) const {
  // Run ids and host names are as given: dump() escapes what JSON must, and
  // replaces bytes that are not UTF-8 rather than throwing on them.
  // Non-ASCII escaped, as Python's json.dumps writes it.
  writeAll(fd_, event.dump(-1, ' ', true, Json::error_handler_t::replace) + "\n");
}

}  // namespace ddprun::launcher

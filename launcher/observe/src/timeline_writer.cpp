#include "ddprun/launcher/observe/timeline_writer.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "ddprun/launcher/config/worker_environment.hpp"
#include "ddprun/launcher/core/log.hpp"
#include "ddprun/launcher/observe/timeline_format.hpp"
#include "ddprun/launcher/observe/timeline_worker_events.hpp"
#include "ddprun/proto/json_text.hpp"

namespace ddprun::launcher {
namespace {

namespace fs = std::filesystem;
using timeline::kAgentTrack;
using timeline::kRendezvousTrack;
using timeline::kRoundsTrack;
using timeline::microseconds;

std::int64_t wallClockMicroseconds() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

double asMicroseconds(std::chrono::nanoseconds value) {
  return static_cast<double>(value.count()) / 1000.0;
}

}  // namespace

TimelineWriter::TimelineWriter(fs::path path, AgentInfo agent)
    : path_(std::move(path)), agent_(std::move(agent)), pid_(static_cast<int>(::getpid())) {
  if (path_.empty()) {
    return;  // --log-dir /dev/null: no files at all
  }
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    log().warn("no timeline: cannot create {}: {}", path_.string(), std::strerror(errno));
    return;
  }
  if (!agent_.worker_events_dir.empty()) {
    std::error_code error;
    fs::create_directories(agent_.worker_events_dir, error);
    if (error) {
      log().warn("timeline: cannot create {} for the workers' own events: {}",
                 agent_.worker_events_dir.string(), error.message());
      agent_.worker_events_dir.clear();
    }
  }
  const Clock::time_point now = Clock::now();
  const std::int64_t wall = wallClockMicroseconds();
  std::lock_guard lock(mutex_);
  Event name = event("process_name", 'M', now, 0);
  name["args"] = {{"name", agent_.host + " (ddprun pid " + std::to_string(pid_) + ")"}};
  write(name);
  nameTrack(kAgentTrack, "agent", now);
  nameTrack(kRendezvousTrack, "rendezvous", now);
  nameTrack(kRoundsTrack, "rounds", now);
  Event start = instant(timeline::kAgentStart, now, kAgentTrack);
  start["args"] = {{"host", agent_.host},
                   {"pid", pid_},
                   {"run_id", agent_.run_id},
                   {"wall_clock_unix_us", wall},
                   {"worker_events", agent_.worker_events_dir.string()}};
  write(start);
}

TimelineWriter::~TimelineWriter() {
  std::lock_guard lock(mutex_);
  if (fd_ >= 0) {
    [[maybe_unused]] const ssize_t ignored = ::write(fd_, "\n]\n", 3);
    ::close(fd_);
  }
}

bool TimelineWriter::writing() const { return fd_ >= 0; }

void TimelineWriter::rendezvousStarted(Clock::time_point at) {
  std::lock_guard lock(mutex_);
  endRound(at);
  waiting_ = true;
  write(event("rendezvous", 'B', at, kRendezvousTrack));
}

void TimelineWriter::roundJoined(const WorkerGroup& group, Clock::duration waited,
                                 Clock::time_point at) {
  std::lock_guard lock(mutex_);
  Event end = event("rendezvous", 'E', at, kRendezvousTrack);
  end["args"] = {{"round", group.attempt},
                 {"waited_ms", std::chrono::duration<double, std::milli>(waited).count()}};
  if (waiting_) {
    write(end);
    waiting_ = false;
  }
  if (group.group_rank != node_rank_) {
    node_rank_ = group.group_rank;
    Event name = event("process_name", 'M', at, 0);
    name["args"] = {{"name", agent_.host + ", node rank " + std::to_string(node_rank_)}};
    write(name);
  }
  round_ = group.attempt;
  round_end_ = "the workers ended";
  Event round = event("round " + std::to_string(group.attempt), 'B', at, kRoundsTrack);
  round["args"] = {{"round", group.attempt},
                   {"node_rank", group.group_rank},
                   {"nodes", group.group_world_size},
                   {"base_rank", group.base_rank},
                   {"world_size", group.world_size},
                   {"store", group.store_host + ":" + std::to_string(group.store_port)}};
  write(round);
}

void TimelineWriter::workerStarted(int local_rank, int rank, pid_t pid, Clock::time_point at) {
  std::lock_guard lock(mutex_);
  const int tid = timeline::workerTrack(local_rank);
  nameTrack(tid, "local rank " + std::to_string(local_rank), at);
  Event start = event("rank " + std::to_string(rank), 'B', at, tid);
  start["args"] = {{"rank", rank}, {"local_rank", local_rank}, {"pid", pid}, {"round", round_}};
  write(start);
  running_workers_.insert(local_rank);
}

void TimelineWriter::workerExited(int local_rank, int rank, pid_t pid, const ExitStatus& status,
                                  bool failed, Clock::time_point at) {
  std::lock_guard lock(mutex_);
  nlohmann::ordered_json how = {{"exit", status.describe()}};
  if (status.kind == ExitStatus::Kind::Exited) {
    how["exit_code"] = status.code;
  } else {
    how["signal"] = signalName(status.code);
  }
  how["failed"] = failed;
  if (running_workers_.erase(local_rank) > 0) {
    Event end = event("rank " + std::to_string(rank), 'E', at, timeline::workerTrack(local_rank));
    end["args"] = how;
    write(end);
  }
  if (failed) {
    Event failure = instant("worker failed", at, kAgentTrack);
    failure["args"] = {{"rank", rank}, {"local_rank", local_rank}, {"pid", pid}, {"round", round_}};
    failure["args"].update(how);
    write(failure);
  }
  foldWorkerEvents(local_rank, rank, at);
}

void TimelineWriter::workerHung(int local_rank, int rank, const std::string& reason,
                                const std::string& where, Clock::time_point at) {
  std::lock_guard lock(mutex_);
  Event hung = instant("worker hung", at, kAgentTrack);
  hung["args"] = {{"rank", rank},
                  {"local_rank", local_rank},
                  {"round", round_},
                  {"reason", reason},
                  {"stacks", where}};
  write(hung);
}

void TimelineWriter::groupStopping(StopReason reason, Clock::time_point at) {
  std::lock_guard lock(mutex_);
  round_end_ = "stopped: " + std::string(stopReasonName(reason));
  Event stop = instant("stop workers", at, kAgentTrack);
  stop["args"] = {{"reason", stopReasonName(reason)}, {"round", round_}};
  write(stop);
}

void TimelineWriter::restarting(int restarts_used, int max_restarts, Clock::time_point at) {
  std::lock_guard lock(mutex_);
  Event restart = instant("restart", at, kAgentTrack);
  restart["args"] = {{"restarts_used", restarts_used}, {"max_restarts", max_restarts}};
  write(restart);
}

void TimelineWriter::finished(int exit_code, Clock::time_point at) {
  std::lock_guard lock(mutex_);
  endWait(at, "the run ended first");
  endRound(at);
  Event end = instant("workers finished", at, kAgentTrack);
  end["args"] = {{"exit_code", exit_code}};
  write(end);
}

void TimelineWriter::clockMeasured(const ClockOffset& offset) {
  std::lock_guard lock(mutex_);
  Event clock = instant(timeline::kClockOffset, Clock::now(), kAgentTrack);
  clock["args"] = {{"clock_offset_us", asMicroseconds(offset.offset)},
                   {"clock_uncertainty_us", asMicroseconds(offset.round_trip)},
                   {"clock", offset.reference}};
  write(clock);
}

void TimelineWriter::quarantined(const QuarantineNotice& notice) {
  std::lock_guard lock(mutex_);
  Event event = instant(timeline::kQuarantined, Clock::now(), kRendezvousTrack);
  event["args"] = {{"host", notice.host},
                   {"failures", notice.failures},
                   {"for_s", std::chrono::duration<double>(notice.left).count()}};
  write(event);
}

void TimelineWriter::close(int exit_code) {
  std::lock_guard lock(mutex_);
  const Clock::time_point now = Clock::now();
  endWait(now, "the run ended first");
  endRound(now);
  Event exit = instant("ddprun exit", now, kAgentTrack);
  exit["args"] = {{"exit_code", exit_code}};
  write(exit);
  if (fd_ >= 0) {
    [[maybe_unused]] const ssize_t ignored = ::write(fd_, "\n]\n", 3);
    ::close(fd_);
    fd_ = -1;
  }
}

TimelineWriter::Event TimelineWriter::event(std::string_view name, char phase, Clock::time_point at,
                                            int tid) const {
  return timeline::traceEvent(name, phase, microseconds(at), pid_, tid);
}

// Thread-scoped: drawn on its track (a process-scoped one spans them all).
TimelineWriter::Event TimelineWriter::instant(std::string_view name, Clock::time_point at,
                                              int tid) const {
  Event instant = event(name, 'i', at, tid);
  instant["s"] = "t";
  return instant;
}

// One line, one write(): a line is never split between two writers, and
// what was written is on disk (in the page cache) whatever becomes of the
// agent.
void TimelineWriter::write(const Event& event) {
  if (fd_ < 0) {
    return;
  }
  std::string line = first_ ? "[\n" : ",\n";
  line += proto::jsonText(event);
  first_ = false;
  if (::write(fd_, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
    log().warn("timeline: cannot write {}: {}; no more events go to it", path_.string(),
               std::strerror(errno));
    ::close(fd_);
    fd_ = -1;
  }
}

void TimelineWriter::nameTrack(int tid, const std::string& name, Clock::time_point at) {
  if (!named_tracks_.insert(tid).second) {
    return;
  }
  Event thread = event("thread_name", 'M', at, tid);
  thread["args"] = {{"name", name}};
  write(thread);
}

void TimelineWriter::endRound(Clock::time_point at) {
  if (round_ < 0) {
    return;
  }
  Event end = event("round " + std::to_string(round_), 'E', at, kRoundsTrack);
  end["args"] = {{"ended", round_end_}};
  write(end);
  round_ = -1;
}

void TimelineWriter::endWait(Clock::time_point at, const std::string& outcome) {
  if (!waiting_) {
    return;
  }
  Event end = event("rendezvous", 'E', at, kRendezvousTrack);
  end["args"] = {{"outcome", outcome}};
  write(end);
  waiting_ = false;
}

// The worker's own events of this round, on the track next to its own.
void TimelineWriter::foldWorkerEvents(int local_rank, int rank, Clock::time_point at) {
  if (agent_.worker_events_dir.empty() || fd_ < 0) {
    return;
  }
  const fs::path file = timelineEventsFile(agent_.worker_events_dir, round_, local_rank);
  WorkerEventsRead read = readWorkerEvents(file);
  const std::string left_out = whatWasLeftOut(read);
  if (!left_out.empty() && !warned_bad_worker_event_) {
    warned_bad_worker_event_ = true;
    log().warn("timeline: {}: {} (said once per run)", file.string(), left_out);
  }
  if (read.events.empty()) {
    return;
  }
  nameTrack(timeline::reportedTrack(local_rank),
            "local rank " + std::to_string(local_rank) + ": reported", at);
  for (const Event& trace :
       reportedTraceEvents(std::move(read.events), pid_, local_rank, rank, round_)) {
    write(trace);
  }
}

}  // namespace ddprun::launcher

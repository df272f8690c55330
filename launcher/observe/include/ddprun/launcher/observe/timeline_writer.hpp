// The agent's timeline.json (timeline_format.hpp), written as the agent's
// life happens: an AgentEvents observer. Rendezvous waits, rounds and each
// worker's life (spawn to exit, with its code or signal) are B/E slices, so
// a slice still open when the agent is killed shows as one that never
// ended; failures, stops, restarts and the end are instants; the clock
// offset to the rendezvous (clockMeasured) is an instant whose args the
// merger reads, and a quarantine of this host (quarantined) one that says
// why and for how long. When a worker exits, the events it reported in its
// DDPRUN_TIMELINE_EVENTS file are folded in, on a track next to its own.
//
// Every event is one write() to a file opened O_APPEND, as it happens: what
// was written survives the agent's SIGKILL. A file that cannot be made or
// written is one warning, and the run goes on without it.
//
// Owns the file. The AgentEvents calls come on the agent's loop thread,
// clockMeasured() and quarantined() on any (a rendezvous backend's), close() on main's after
// the run; one mutex keeps their lines whole and in order.
#pragma once

#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "ddprun/launcher/core/agent_events.hpp"

namespace ddprun::launcher {

class TimelineWriter final : public AgentEvents {
 public:
  // Who writes it.
  struct AgentInfo {
    std::string host;
    std::string run_id = "none";
    // Where the workers' own events files are (timelineEventsFile()); empty: none.
    std::filesystem::path worker_events_dir;
  };

  // Creates `path` (replacing a file there) and writes the process and track
  // names and the "agent start" event. An empty `path`: writes nothing.
  TimelineWriter(std::filesystem::path path, AgentInfo agent);
  // Closes the array if close() did not.
  ~TimelineWriter() override;
  TimelineWriter(const TimelineWriter&) = delete;
  TimelineWriter& operator=(const TimelineWriter&) = delete;

  const std::filesystem::path& path() const { return path_; }
  // Whether the file was made (before the run: the workers are told of
  // their events files only then).
  bool writing() const;

  void rendezvousStarted(Clock::time_point at) override;
  void roundJoined(const WorkerGroup& group, Clock::duration waited, Clock::time_point at) override;
  void workerStarted(int local_rank, int rank, pid_t pid, Clock::time_point at) override;
  void workerExited(int local_rank, int rank, pid_t pid, const ExitStatus& status, bool failed,
                    Clock::time_point at) override;
  void workerHung(int local_rank, int rank, const std::string& reason, const std::string& where,
                  Clock::time_point at) override;
  void groupStopping(StopReason reason, Clock::time_point at) override;
  void restarting(int restarts_used, int max_restarts, Clock::time_point at) override;
  void finished(int exit_code, Clock::time_point at) override;

  // Any thread: a measurement of this agent's clock against the rendezvous'.
  void clockMeasured(const ClockOffset& offset);
  // Any thread: the rendezvous quarantined this host (an instant on the
  // rendezvous track: the node stands by).
  void quarantined(const QuarantineNotice& notice);
  // ddprun's exit status, after the end of the job (an exit barrier may
  // come after finished()); then the closing "]". Later events are dropped.
  void close(int exit_code);

 private:
  using Event = nlohmann::ordered_json;

  Event event(std::string_view name, char phase, Clock::time_point at, int tid) const;
  Event instant(std::string_view name, Clock::time_point at, int tid) const;
  // With mutex_ held.
  void write(const Event& event);
  void nameTrack(int tid, const std::string& name, Clock::time_point at);
  void endRound(Clock::time_point at);
  void endWait(Clock::time_point at, const std::string& outcome);
  void foldWorkerEvents(int local_rank, int rank, Clock::time_point at);

  std::filesystem::path path_;
  AgentInfo agent_;
  int pid_;
  std::mutex mutex_;
  int fd_ = -1;  // -1: none (never made, failed, or closed)
  bool first_ = true;
  // What is open, so that each B gets its E.
  bool waiting_ = false;
  int round_ = -1;         // the round whose slice is open; -1: none
  std::string round_end_;  // why it ends: the last stop's reason
  int node_rank_ = -1;
  std::set<int> named_tracks_;
  std::set<int> running_workers_;  // local ranks
  bool warned_bad_worker_event_ = false;
};

}  // namespace ddprun::launcher

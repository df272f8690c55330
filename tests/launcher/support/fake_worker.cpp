// A stand-in worker for the launcher tests. Behaviour from its arguments:
//   --env-to DIR        write this worker's environment contract, OMP_NUM_THREADS, the
//                       NCCL async-error variables and the socket interface variables
//                       to DIR/<LOCAL_RANK>.env
//   --ready-to DIR      create DIR/<LOCAL_RANK>.ready once running
//   --exit N            exit with N (default 0)
//   --signal N          kill itself with signal N
//   --hang              sleep until killed
//   --ignore-term       ignore SIGTERM (then hang: only SIGKILL ends it)
//   --only-rank R       apply --exit/--signal/--hang only on global RANK R (others exit 0)
//   --only-attempt A    ... and only when TORCHELASTIC_RESTART_COUNT is A
//   --after FILE        first wait (up to 30 s) until FILE exists
//   --chatter N         write N lines to stdout, each in two write()s, and
//                       one line to stderr
//   --error-json TEXT   write a torch @record error file ($TORCHELASTIC_ERROR_FILE)
//                       whose traceback is TEXT
//   --tick MS N         write a line to stdout every MS milliseconds, N times
//   --spin MS           use the CPU for MS milliseconds, silently
//   --child-spin MS     fork a child that does --spin MS, and wait for it
//                       (idle and silent itself, as a DataLoader's parent)
//   --timer-request J   write the line J to the file timer's pipe
//                       ($TORCHELASTIC_TIMER_FILE) as torch's FileTimerClient
//                       does; "$PID" in J becomes this process's pid and
//                       "$DEADLINE" the wall-clock time 0.5 s from now
//   --leak DIR          start three processes that only wait (one in this worker's
//                       process group, one that called setsid, and a daemon: fork,
//                       setsid, fork, its parent gone) and list them, with this
//                       worker's cgroup, in DIR/leak.<attempt>.<LOCAL_RANK>
//   --exit-if-attempt A N  exit with N here when TORCHELASTIC_RESTART_COUNT is A
//   --exit-on-host H N  exit with N here when this machine's host name is H (a bad host)
//   --timeline-event NAME  append {"name": NAME, "ts_monotonic_ns": now, "attempt": A}
//                       to $DDPRUN_TIMELINE_EVENTS, as a worker reports its own events
//   --timeline-lines FILE  append FILE's bytes to $DDPRUN_TIMELINE_EVENTS, as they are
//   --progress N MS     report steps 1..N to $DDPRUN_PROGRESS_EVENTS, one every MS
//                       milliseconds, as a training loop does
//   --progress-rank R N MS  the same, only on global RANK R
//   --spin-rank R MS    --spin MS, only on global RANK R
//   --nccl-dump         write a stand-in Flight Recorder dump where NCCL's would go:
//                       $TORCH_NCCL_DEBUG_INFO_TEMP_FILE followed by RANK
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "ddprun/proto/env_contract.hpp"

namespace {

std::string envOr(const char* name, const char* fallback) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : fallback;
}

void writeEnvTo(std::ostream& out) {
  for (const auto& [name, value] :
       ddprun::proto::toEnvironment(ddprun::proto::fromProcessEnvironment())) {
    out << name << "=" << value << "\n";
  }
  out << "OMP_NUM_THREADS=" << envOr("OMP_NUM_THREADS", "") << "\n";
  // Inherited or defaulted, not the contract: written only when set.
  for (const auto name :
       {ddprun::proto::env::kNcclAsyncErrorHandling,
        ddprun::proto::env::kLegacyNcclAsyncErrorHandling, ddprun::proto::env::kGlooSocketIfname,
        ddprun::proto::env::kNcclSocketIfname}) {
    if (const char* value = std::getenv(std::string(name).c_str())) {
      out << name << "=" << value << "\n";
    }
  }
}

// The file appears whole (written, then renamed): a test that reads it while
// a restarted worker rewrites it must never see it half written or empty.
void writeEnv(const std::string& dir) {
  const std::string name = dir + "/" + envOr("LOCAL_RANK", "x") + ".env";
  {
    std::ofstream out(name + ".tmp");
    writeEnvTo(out);
  }
  std::filesystem::rename(name + ".tmp", name);
}

// Each line leaves in two writes, so a relay that is not line-aware would
// let other workers' bytes in between.
void chatter(int lines) {
  const std::string rank = envOr("RANK", "?");
  for (int i = 0; i < lines; ++i) {
    const std::string head = "rank " + rank + " line " + std::to_string(i);
    const std::string tail = " end\n";
    [[maybe_unused]] ssize_t a = write(STDOUT_FILENO, head.data(), head.size());
    usleep(100);
    [[maybe_unused]] ssize_t b = write(STDOUT_FILENO, tail.data(), tail.size());
  }
  const std::string err = "rank " + rank + " says stderr\n";
  [[maybe_unused]] ssize_t c = write(STDERR_FILENO, err.data(), err.size());
}

void writeErrorJson(const std::string& traceback) {
  std::ofstream(envOr("TORCHELASTIC_ERROR_FILE", "/dev/null"))
      << R"({"message": {"message": "RuntimeError: boom", "extraInfo": {"py_callstack": ")"
      << traceback << R"(", "timestamp": "0"}}})";
}

void tick(int every_ms, int count) {
  const std::string rank = envOr("RANK", "?");
  for (int i = 0; i < count; ++i) {
    usleep(static_cast<useconds_t>(every_ms) * 1000);
    const std::string line = "rank " + rank + " tick " + std::to_string(i) + "\n";
    [[maybe_unused]] ssize_t written = write(STDOUT_FILENO, line.data(), line.size());
  }
}

void spin(int ms) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  volatile unsigned long sink = 0;
  while (std::chrono::steady_clock::now() < until) {
    for (int i = 0; i < 10000; ++i) {
      sink = sink + static_cast<unsigned long>(i);
    }
  }
}

void childSpin(int ms) {
  const pid_t child = fork();
  if (child == 0) {
    spin(ms);
    _exit(0);
  }
  if (child > 0) {
    waitpid(child, nullptr, 0);
  }
}

// As FileTimerClient: open without blocking (fails if nobody serves the
// pipe), one write of the line and its newline, close.
void timerRequest(std::string json) {
  for (auto at = json.find("$PID"); at != std::string::npos; at = json.find("$PID")) {
    json.replace(at, 4, std::to_string(getpid()));
  }
  const auto deadline = std::chrono::system_clock::now() + std::chrono::milliseconds(500);
  const std::string seconds =
      std::to_string(std::chrono::duration<double>(deadline.time_since_epoch()).count());
  for (auto at = json.find("$DEADLINE"); at != std::string::npos; at = json.find("$DEADLINE")) {
    json.replace(at, 9, seconds);
  }
  json += "\n";
  const int fd = open(envOr("TORCHELASTIC_TIMER_FILE", "/nonexistent").c_str(),
                      O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0 || write(fd, json.data(), json.size()) != static_cast<ssize_t>(json.size())) {
    _exit(99);  // torch's client raises BrokenPipeError
  }
  close(fd);
}

// A child that waits until killed; in the caller's process group, or in a
// session of its own.
pid_t waitingChild(bool new_session) {
  const pid_t child = fork();
  if (child == 0) {
    if (new_session) {
      setsid();
    }
    for (;;) {
      pause();
    }
  }
  return child;
}

// fork, setsid, fork: the daemon's parent exits at once, so the daemon is
// nobody's child and in no group or session of this worker's.
pid_t daemonChild() {
  int report[2];
  if (pipe(report) != 0) {
    return -1;
  }
  const pid_t middle = fork();
  if (middle == 0) {
    close(report[0]);
    const pid_t daemon = waitingChild(true);
    [[maybe_unused]] ssize_t written = write(report[1], &daemon, sizeof(daemon));
    _exit(0);
  }
  close(report[1]);
  pid_t daemon = -1;
  [[maybe_unused]] ssize_t got = read(report[0], &daemon, sizeof(daemon));
  close(report[0]);
  waitpid(middle, nullptr, 0);
  return daemon;
}

// The list appears whole (written, then renamed), so a test never reads half.
void leak(const std::string& dir) {
  const std::string name =
      dir + "/leak." + envOr("TORCHELASTIC_RESTART_COUNT", "0") + "." + envOr("LOCAL_RANK", "x");
  {
    std::ofstream out(name + ".tmp");
    out << "group " << waitingChild(false) << "\n";
    out << "setsid " << waitingChild(true) << "\n";
    out << "daemon " << daemonChild() << "\n";
    std::ifstream cgroups("/proc/self/cgroup");
    for (std::string line; std::getline(cgroups, line);) {
      if (line.rfind("0::", 0) == 0) {
        out << "cgroup " << line.substr(3) << "\n";
      }
    }
  }
  std::filesystem::rename(name + ".tmp", name);
}

void timelineEvent(const std::string& name) {
  const std::string path = envOr(std::string(ddprun::proto::env::kTimelineEvents).c_str(), "");
  if (path.empty()) {
    return;
  }
  const auto now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                       std::chrono::steady_clock::now().time_since_epoch())
                       .count();
  std::ofstream(path, std::ios::app)
      << "{\"name\": \"" << name << "\", \"ts_monotonic_ns\": " << now
      << ", \"attempt\": " << envOr("TORCHELASTIC_RESTART_COUNT", "-1") << "}\n";
}

void timelineLines(const std::string& file) {
  const std::string path = envOr(std::string(ddprun::proto::env::kTimelineEvents).c_str(), "");
  if (!path.empty()) {
    std::ofstream(path, std::ios::app | std::ios::binary) << std::ifstream(file).rdbuf();
  }
}

void progress(int steps, int interval_ms) {
  const std::string path = envOr(std::string(ddprun::proto::env::kProgressEvents).c_str(), "");
  for (int step = 1; step <= steps && !path.empty(); ++step) {
    usleep(static_cast<useconds_t>(interval_ms) * 1000);
    const auto now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                         std::chrono::steady_clock::now().time_since_epoch())
                         .count();
    std::ofstream(path, std::ios::app) << "{\"name\": \"progress\", \"ts_monotonic_ns\": " << now
                                       << ", \"step\": " << step << "}\n";
  }
}

bool isRank(const char* rank) { return envOr("RANK", "-1") == std::string(rank); }

std::string hostName() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  return name;
}

bool isAttempt(const char* attempt) { return envOr("TORCHELASTIC_RESTART_COUNT", "-1") == attempt; }

}  // namespace

int main(int argc, char** argv) {
  int exit_code = 0;
  int signal_number = 0;
  bool hang = false;
  int only_rank = -1;
  int only_attempt = -1;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const char* next = i + 1 < argc ? argv[i + 1] : "";
    if (arg == "--env-to") {
      writeEnv(next);
      ++i;
    } else if (arg == "--nccl-dump") {
      // What NCCL's Flight Recorder does on a timeout: a dump named by rank.
      std::ofstream(envOr("TORCH_NCCL_DEBUG_INFO_TEMP_FILE", "/dev/null/") + envOr("RANK", "x"))
          << "flight recorder dump of rank " << envOr("RANK", "x") << "\n";
    } else if (arg == "--ready-to") {
      std::ofstream(std::string(next) + "/" + envOr("LOCAL_RANK", "x") + ".ready") << getpid();
      ++i;
    } else if (arg == "--exit") {
      exit_code = std::atoi(next);
      ++i;
    } else if (arg == "--signal") {
      signal_number = std::atoi(next);
      ++i;
    } else if (arg == "--hang") {
      hang = true;
    } else if (arg == "--ignore-term") {
      signal(SIGTERM, SIG_IGN);
      hang = true;
    } else if (arg == "--only-rank") {
      only_rank = std::atoi(next);
      ++i;
    } else if (arg == "--after") {
      // Polls: a test helper that must not depend on anything but the file.
      for (int waited_ms = 0; access(next, F_OK) != 0 && waited_ms < 30'000; ++waited_ms) {
        usleep(1000);
      }
      ++i;
    } else if (arg == "--chatter") {
      chatter(std::atoi(next));
      ++i;
    } else if (arg == "--error-json") {
      writeErrorJson(next);
      ++i;
    } else if (arg == "--tick") {
      tick(std::atoi(next), i + 2 < argc ? std::atoi(argv[i + 2]) : 0);
      i += 2;
    } else if (arg == "--spin") {
      spin(std::atoi(next));
      ++i;
    } else if (arg == "--child-spin") {
      childSpin(std::atoi(next));
      ++i;
    } else if (arg == "--timer-request") {
      timerRequest(next);
      ++i;
    } else if (arg == "--leak") {
      leak(next);
      ++i;
    } else if (arg == "--exit-if-attempt") {
      if (i + 2 < argc && isAttempt(next)) {
        return std::atoi(argv[i + 2]);
      }
      i += 2;
    } else if (arg == "--exit-on-host") {
      if (i + 2 < argc && hostName() == next) {
        return std::atoi(argv[i + 2]);
      }
      i += 2;
    } else if (arg == "--timeline-event") {
      timelineEvent(next);
      ++i;
    } else if (arg == "--timeline-lines") {
      timelineLines(next);
      ++i;
    } else if (arg == "--progress") {
      progress(std::atoi(next), i + 2 < argc ? std::atoi(argv[i + 2]) : 0);
      i += 2;
    } else if (arg == "--progress-rank") {
      if (isRank(next) && i + 3 < argc) {
        progress(std::atoi(argv[i + 2]), std::atoi(argv[i + 3]));
      }
      i += 3;
    } else if (arg == "--spin-rank") {
      if (isRank(next) && i + 2 < argc) {
        spin(std::atoi(argv[i + 2]));
      }
      i += 2;
    } else if (arg == "--only-attempt") {
      only_attempt = std::atoi(next);
      ++i;
    }
  }
  const bool chosen =
      (only_rank < 0 || std::atoi(envOr("RANK", "-1").c_str()) == only_rank) &&
      (only_attempt < 0 ||
       std::atoi(envOr("TORCHELASTIC_RESTART_COUNT", "-1").c_str()) == only_attempt);
  if (!chosen) {
    return 0;
  }
  if (signal_number != 0) {
    signal(signal_number, SIG_DFL);
    raise(signal_number);
  }
  while (hang) {
    pause();
  }
  return exit_code;
}

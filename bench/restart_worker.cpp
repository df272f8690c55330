// restart_worker: the worker launch_bench runs under both launchers (with
// --no-python) to time a restart and to hold a group still while the agent's
// memory is sampled. It talks to the benchmark only through files in
// $LAUNCH_BENCH_DIR; stamps are CLOCK_MONOTONIC nanoseconds, which is one
// clock for every process on a Linux machine.
//
//   restart_worker restart
//     attempt 0 (TORCHELASTIC_RESTART_COUNT=0): every rank writes up.<rank>;
//       rank 0 waits for the others, then $LAUNCH_BENCH_CRASH_DELAY_US more,
//       writes `crash` and exits 1; the others sleep until SIGTERM, write
//       term.<rank> when it arrives and die of it.
//     attempt 1 and later: every rank writes start.<rank> (its time of entry
//       to main) and exits 0.
//   restart_worker hold
//     every rank writes up.<rank>, waits for `release`, exits 0.
//   restart_worker rdzv  (rdzv_bench)
//     every worker writes rdzv.<phase>.<rank> = "<entry ns> <restart count>
//       <world size>" by rename, so a reader never sees half of it. Phase is
//       1 once $LAUNCH_BENCH_DIR/killed exists (rdzv_bench writes it just
//       before it kills an agent), else 0: torchrun keeps the restart count
//       at 0 across a membership change, so the count alone cannot tell a
//       replacement. A phase-0 worker then holds for $LAUNCH_BENCH_HOLD_S
//       seconds if that is set (its agent's SIGTERM ends it first), else it
//       exits 0.
//
// Every wait has a deadline (exit 3), and the worker dies with its parent, so
// nothing lingers if a launcher or the benchmark is killed.
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <string_view>
#include <thread>

namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kWaitLimit = std::chrono::seconds(60);
constexpr int kDeadlineExit = 3;

std::int64_t monotonicNs() {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<std::int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
}

// Async-signal-safe: the SIGTERM handler writes a stamp with it.
void writeStamp(const char* path, std::int64_t value) {
  char digits[24];
  int length = 0;
  do {
    digits[sizeof(digits) - 1 - length] = static_cast<char>('0' + value % 10);
    value /= 10;
    ++length;
  } while (value > 0 && length < static_cast<int>(sizeof(digits)));
  const int fd = ::open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return;
  }
  [[maybe_unused]] auto written =
      ::write(fd, digits + sizeof(digits) - length, static_cast<std::size_t>(length));
  ::close(fd);
}

int envInt(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? std::atoi(value) : 0;
}

std::string benchFile(std::string_view name) {
  const char* dir = std::getenv("LAUNCH_BENCH_DIR");
  return std::string(dir != nullptr ? dir : ".") + "/" + std::string(name);
}

bool exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

// Polls rather than blocking on inotify: the wait is outside every measured
// interval, so its granularity does not matter.
template <typename Ready>
void waitUntil(Ready ready) {
  const auto deadline = Clock::now() + kWaitLimit;
  while (!ready()) {
    if (Clock::now() > deadline) {
      std::_Exit(kDeadlineExit);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

char g_term_path[4096];

void onTerm(int signal) {
  writeStamp(g_term_path, monotonicNs());
  ::signal(signal, SIG_DFL);  // die of the signal, as a worker without a handler would
  ::raise(signal);
}

// Before up.<rank> is written, so a SIGTERM that follows rank 0's crash at
// once still leaves its stamp.
void stampTermOnSigterm(int rank) {
  const std::string term = benchFile("term." + std::to_string(rank));
  std::strncpy(g_term_path, term.c_str(), sizeof(g_term_path) - 1);
  struct sigaction action {};
  action.sa_handler = onTerm;
  ::sigaction(SIGTERM, &action, nullptr);
}

[[noreturn]] void crashOrSleep(int rank, int world_size) {
  if (rank == 0) {
    waitUntil([world_size] {
      for (int other = 1; other < world_size; ++other) {
        if (!exists(benchFile("up." + std::to_string(other)))) {
          return false;
        }
      }
      return true;
    });
    std::this_thread::sleep_for(std::chrono::microseconds(envInt("LAUNCH_BENCH_CRASH_DELAY_US")));
    writeStamp(benchFile("crash").c_str(), monotonicNs());
    std::_Exit(1);
  }
  std::this_thread::sleep_for(kWaitLimit);  // SIGTERM ends this early
  std::_Exit(kDeadlineExit);
}

// rdzv_bench's mode (see the top of this file).
int rdzvStamp(std::int64_t entered, int rank) {
  const bool replacement = exists(benchFile("killed"));
  const std::string name = "rdzv." + std::string(replacement ? "1." : "0.") + std::to_string(rank);
  char text[96];
  const int length =
      std::snprintf(text, sizeof(text), "%lld %d %d\n", static_cast<long long>(entered),
                    envInt("TORCHELASTIC_RESTART_COUNT"), envInt("WORLD_SIZE"));
  const std::string temporary = benchFile(name + ".tmp");
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0 || ::write(fd, text, static_cast<std::size_t>(length)) != length) {
    return 4;
  }
  ::close(fd);
  if (::rename(temporary.c_str(), benchFile(name).c_str()) != 0) {
    return 4;
  }
  const int hold_s = envInt("LAUNCH_BENCH_HOLD_S");
  if (!replacement && hold_s > 0) {
    std::this_thread::sleep_for(std::chrono::seconds(hold_s));  // SIGTERM ends this early
    return kDeadlineExit;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::int64_t entered = monotonicNs();  // first, so the stamp is the process's start
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  const std::string_view mode = argc > 1 ? argv[1] : "";
  const int rank = envInt("RANK");
  const std::string rank_text = std::to_string(rank);
  if (mode == "rdzv") {
    return rdzvStamp(entered, rank);
  }
  if (mode == "restart" && envInt("TORCHELASTIC_RESTART_COUNT") > 0) {
    writeStamp(benchFile("start." + rank_text).c_str(), entered);
    return 0;
  }
  if (mode == "restart" && rank != 0) {
    stampTermOnSigterm(rank);
  }
  writeStamp(benchFile("up." + rank_text).c_str(), entered);
  if (mode == "restart") {
    crashOrSleep(rank, envInt("WORLD_SIZE"));
  }
  if (mode == "hold") {
    const std::string release = benchFile("release");
    waitUntil([&release] { return exists(release); });
    return 0;
  }
  return 2;  // unknown mode: a failure the benchmark reports
}

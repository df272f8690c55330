// Leftovers: the processes a test worker started so that they would outlive
// it (fake_worker --leak, leaky_worker.py), read from its
// leak.<attempt>.<local rank> file ("<kind> <pid>" lines), and whether each is
// still alive. A process is known by its pid and its start time (field 22 of
// /proc/<pid>/stat, read when the list is read), so a recycled pid is never
// taken for it; a zombie is dead. Used by one test thread.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace ddprun::launcher::testing {

struct Leftover {
  std::string kind;  // group, setsid, daemon, subprocess, mp_process, dataloader
  pid_t pid = -1;
  std::string start_time;  // empty: already gone when the list was read
};

// State (R, S, Z, ...) and start time from /proc/<pid>/stat; nullopt once reaped.
inline std::optional<std::pair<char, std::string>> procStat(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line) || line.rfind(')') == std::string::npos) {
    return std::nullopt;
  }
  // After ") ": state is field 3 overall, the start time field 22.
  std::istringstream rest(line.substr(line.rfind(')') + 2));
  std::string field;
  char state = '?';
  for (int index = 3; index <= 22 && rest >> field; ++index) {
    if (index == 3) {
      state = field.front();
    }
    if (index == 22) {
      return std::make_pair(state, field);
    }
  }
  return std::nullopt;
}

inline std::vector<Leftover> readLeftovers(const std::filesystem::path& file) {
  std::vector<Leftover> leftovers;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    Leftover leftover;
    if (!(std::istringstream(line) >> leftover.kind >> leftover.pid)) {
      continue;  // fake_worker's "cgroup <path>": not a process
    }
    const auto stat = procStat(leftover.pid);
    leftover.start_time = stat ? stat->second : "";
    leftovers.push_back(leftover);
  }
  return leftovers;
}

inline bool alive(const Leftover& leftover) {
  if (leftover.start_time.empty() || kill(leftover.pid, 0) != 0) {
    return false;
  }
  const auto stat = procStat(leftover.pid);
  return stat && stat->second == leftover.start_time && stat->first != 'Z' && stat->first != 'X';
}

// "setsid 1234, daemon 1240": the ones still alive, for failure messages.
inline std::string describeAlive(const std::vector<Leftover>& leftovers) {
  std::string text;
  for (const Leftover& leftover : leftovers) {
    if (alive(leftover)) {
      text += (text.empty() ? "" : ", ") + leftover.kind + " " + std::to_string(leftover.pid);
    }
  }
  return text;
}

inline bool noneAlive(const std::vector<Leftover>& leftovers) {
  return describeAlive(leftovers).empty();
}

// A failed test must not leave its leftovers running either.
inline void killAlive(const std::vector<Leftover>& leftovers) {
  for (const Leftover& leftover : leftovers) {
    if (alive(leftover)) {
      kill(leftover.pid, SIGKILL);
    }
  }
}

// The cgroup v2 path fake_worker --leak recorded ("0::" line of /proc/self/cgroup).
inline std::string cgroupOf(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::string kind;
  std::string value;
  while (in >> kind >> value) {
    if (kind == "cgroup") {
      return value;
    }
  }
  return "";
}

}  // namespace ddprun::launcher::testing

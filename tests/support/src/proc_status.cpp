#include "ddprun/test_support/proc_status.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

namespace ddprun::test_support {

namespace {

// The line "<field>:   1234 kB" of a /proc file, as 1234.
std::optional<std::size_t> kibLineOf(const std::string& path, const char* field) {
  std::ifstream file(path);
  const std::string prefix = std::string(field) + ":";
  std::string line;
  while (std::getline(file, line)) {
    if (line.rfind(prefix, 0) == 0) {
      return std::stoul(line.substr(prefix.size()));
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::size_t> procStatusKiB(pid_t pid, const char* field) {
  return kibLineOf("/proc/" + std::to_string(pid) + "/status", field);
}

std::optional<std::size_t> procPssKiB(pid_t pid) {
  return kibLineOf("/proc/" + std::to_string(pid) + "/smaps_rollup", "Pss");
}

std::optional<std::size_t> threadCountOf(pid_t pid) { return procStatusKiB(pid, "Threads"); }

double cpuSecondsOf(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) {
    return 0.0;
  }
  // Fields after the parenthesised command name (which may hold spaces);
  // utime and stime are the 14th and 15th fields overall, i.e. the 12th and
  // 13th after ") ".
  std::istringstream rest(line.substr(line.rfind(')') + 2));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  for (int i = 1; i <= 13 && rest >> field; ++i) {
    if (i == 12) {
      utime = std::stoull(field);
    }
    if (i == 13) {
      stime = std::stoull(field);
    }
  }
  return static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// The children of the main thread: the benchmarks and tests that ask spawn
// from it.
std::optional<pid_t> childNamed(pid_t parent, const std::string& name) {
  const std::string task = "/proc/" + std::to_string(parent) + "/task/" + std::to_string(parent);
  std::ifstream children(task + "/children");
  for (pid_t child = 0; children >> child;) {
    std::string comm;
    std::ifstream("/proc/" + std::to_string(child) + "/comm") >> comm;
    if (comm == name) {
      return child;
    }
  }
  return std::nullopt;
}

pid_t ddprunAgentOf(pid_t ddprun) { return childNamed(ddprun, "ddprun").value_or(ddprun); }

int processesWith(const std::string& marker, const std::string& program) {
  int found = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string pid = entry.path().filename();
    if (pid.find_first_not_of("0123456789") != std::string::npos) {
      continue;
    }
    std::ifstream cmdline(entry.path() / "cmdline");
    const std::string text((std::istreambuf_iterator<char>(cmdline)),
                           std::istreambuf_iterator<char>());
    std::ifstream stat(entry.path() / "stat");
    std::string line;
    std::getline(stat, line);
    const auto close = line.rfind(')');
    const bool zombie =
        close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'Z';
    const std::string argv0 = text.substr(0, text.find('\0'));
    if (!zombie && text.find(marker) != std::string::npos && argv0.ends_with(program)) {
      ++found;
    }
  }
  return found;
}

}  // namespace ddprun::test_support

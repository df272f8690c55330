#include "ddprun/launcher/supervision/procfs.hpp"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <set>
#include <sstream>
#include <string>

namespace ddprun::launcher {
namespace {

std::string readAll(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

bool handlesSignal(pid_t pid, int signal) {
  if (signal < 1 || signal > 64) {
    return false;
  }
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::uint64_t handled = 0;
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("SigCgt:", 0) == 0 || line.rfind("SigIgn:", 0) == 0) {
      handled |= std::stoull(line.substr(7), nullptr, 16);
    }
  }
  return ((handled >> (signal - 1)) & 1U) != 0;
}

// Fields after "(comm)", which may itself hold blanks and parentheses:
// state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt
// utime stime cutime cstime ...
std::optional<ProcStat> readProcStat(pid_t pid) {
  const std::string text = readAll("/proc/" + std::to_string(pid) + "/stat");
  const auto comm_end = text.rfind(')');
  if (comm_end == std::string::npos) {
    return std::nullopt;
  }
  std::istringstream fields(text.substr(comm_end + 1));
  std::string state;
  long long ppid = 0;
  long long pgrp = 0;
  long long session = 0;
  long long skipped = 0;
  unsigned long long utime = 0;
  unsigned long long stime = 0;
  long long cutime = 0;
  long long cstime = 0;
  fields >> state >> ppid >> pgrp >> session;
  for (int i = 0; i < 7; ++i) {
    fields >> skipped;  // tty_nr .. cmajflt
  }
  fields >> utime >> stime >> cutime >> cstime;
  if (!fields) {
    return std::nullopt;
  }
  ProcStat stat;
  stat.state = state.empty() ? '?' : state[0];
  stat.pgrp = static_cast<pid_t>(pgrp);
  stat.ppid = static_cast<pid_t>(ppid);
  stat.session = static_cast<pid_t>(session);
  stat.cpu_ticks = utime + stime + static_cast<unsigned long long>(cutime + cstime);
  return stat;
}

std::vector<pid_t> childrenOf(pid_t pid) {
  std::vector<pid_t> children;
  std::error_code error;
  const std::filesystem::path tasks = "/proc/" + std::to_string(pid) + "/task";
  for (const auto& task : std::filesystem::directory_iterator(tasks, error)) {
    std::istringstream listed(readAll((task.path() / "children").string()));
    for (long long child = 0; listed >> child;) {
      children.push_back(static_cast<pid_t>(child));
    }
  }
  return children;
}

std::vector<pid_t> processTree(pid_t root) {
  std::vector<pid_t> tree = {root};
  std::set<pid_t> seen = {root};
  for (std::size_t next = 0; next < tree.size(); ++next) {
    for (pid_t child : childrenOf(tree[next])) {
      if (seen.insert(child).second) {
        tree.push_back(child);
      }
    }
  }
  return tree;
}

std::optional<std::uint64_t> treeCpuTicks(pid_t root) {
  const auto own = readProcStat(root);
  if (!own) {
    return std::nullopt;
  }
  std::uint64_t ticks = own->cpu_ticks;
  const std::vector<pid_t> tree = processTree(root);
  for (std::size_t i = 1; i < tree.size(); ++i) {
    if (const auto stat = readProcStat(tree[i])) {
      ticks += stat->cpu_ticks;
    }
  }
  return ticks;
}

bool belongsTo(pid_t pid, pid_t root) {
  if (pid == root) {
    return true;
  }
  const auto stat = readProcStat(pid);
  if (!stat) {
    return false;
  }
  if (stat->session == root) {
    return true;
  }
  // Up the parents, boundedly (a pid cycle cannot happen, a reused pid might).
  pid_t parent = stat->ppid;
  for (int depth = 0; parent > 1 && depth < 64; ++depth) {
    if (parent == root) {
      return true;
    }
    const auto above = readProcStat(parent);
    if (!above) {
      return false;
    }
    parent = above->ppid;
  }
  return false;
}

}  // namespace ddprun::launcher

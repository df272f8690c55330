#include "ddprun/launcher/supervision/kernel_wait.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sstream>

#include "ddprun/launcher/supervision/procfs.hpp"
#include "ddprun/proto/visible_text.hpp"

namespace ddprun::launcher {
namespace {

constexpr std::size_t kCommandShown = 200;

struct ProcText {
  std::string text;
  int error = 0;  // errno of the open or the read; 0: read
};

// Read with open(2), not a stream, to keep errno: /proc/<pid>/stack says
// EACCES to anyone without CAP_SYS_ADMIN, and that is what the line reports.
ProcText readProcFile(const std::string& path) {
  ProcText result;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    result.error = errno;
    return result;
  }
  char buffer[4096];
  for (;;) {
    const ssize_t got = ::read(fd, buffer, sizeof buffer);
    if (got > 0) {
      result.text.append(buffer, static_cast<std::size_t>(got));
    } else if (got == 0 || errno != EINTR) {
      result.error = got < 0 ? errno : 0;
      break;
    }
  }
  ::close(fd);
  return result;
}

std::string procPath(pid_t pid, const char* file) {
  return "/proc/" + std::to_string(pid) + "/" + file;
}

std::string trimmed(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) {
    text.pop_back();
  }
  return text;
}

std::string cut(std::string text) {
  if (text.size() > kCommandShown) {
    text.resize(kCommandShown);
    text += "...";
  }
  return proto::visible(text);
}

}  // namespace

std::vector<std::string> parseKernelStack(std::string_view text) {
  std::vector<std::string> frames;
  std::istringstream lines{std::string(text)};
  for (std::string line; std::getline(lines, line);) {
    // "[<0>] name+0xoff/0xsize": the address in brackets (zeroed for all but
    // root, even then), then the symbol and its offset.
    const std::size_t name_start = line.find("] ");
    std::string name = line.substr(name_start == std::string::npos ? 0 : name_start + 2);
    name = name.substr(0, name.find('+'));
    name = trimmed(std::move(name));
    if (!name.empty()) {
      frames.push_back(std::move(name));
    }
  }
  return frames;
}

KernelWait readKernelWait(pid_t pid) {
  KernelWait wait;
  if (const auto stat = readProcStat(pid)) {
    wait.state = stat->state;
  }
  const ProcText wchan = readProcFile(procPath(pid, "wchan"));
  // "0": running, or a kernel that hides it.
  wait.wchan = wchan.error == 0 && trimmed(wchan.text) != "0" ? trimmed(wchan.text) : "";
  const ProcText stack = readProcFile(procPath(pid, "stack"));
  wait.stack = parseKernelStack(stack.text);
  if (wait.stack.empty()) {
    wait.stack_unreadable =
        procPath(pid, "stack") + ": " + (stack.error != 0 ? std::strerror(stack.error) : "empty");
  }
  return wait;
}

std::string describeState(char state) {
  switch (state) {
    case 'R':
      return "R (running)";
    case 'S':
      return "S (sleeping)";
    case 'D':
      return "D (uninterruptible sleep)";
    case 'Z':
      return "Z (zombie)";
    case 'T':
      return "T (stopped)";
    case 't':
      return "t (stopped by a debugger)";
    case 'X':
      return "X (dead)";
    case 'I':
      return "I (idle)";
    case '?':
      return "unknown (the process is gone)";
    default:
      return std::string(1, state);
  }
}

std::string describeKernelWait(const KernelWait& wait) {
  std::string text = "state " + describeState(wait.state) + ", wchan " +
                     (wait.wchan.empty() ? std::string("unknown") : proto::visible(wait.wchan));
  if (wait.stack.empty()) {
    return text + ", kernel stack unreadable (" + wait.stack_unreadable + ")";
  }
  text += ", kernel stack ";
  for (std::size_t i = 0; i < wait.stack.size(); ++i) {
    text += (i == 0 ? "" : " <- ") + proto::visible(wait.stack[i]);
  }
  return text;
}

std::string commandLineOf(pid_t pid) {
  std::string arguments = readProcFile(procPath(pid, "cmdline")).text;
  while (!arguments.empty() && arguments.back() == '\0') {
    arguments.pop_back();
  }
  if (!arguments.empty()) {
    std::replace(arguments.begin(), arguments.end(), '\0', ' ');
    return cut(std::move(arguments));
  }
  const std::string name = trimmed(readProcFile(procPath(pid, "comm")).text);
  return name.empty() ? std::string() : "[" + cut(name) + "]";
}

}  // namespace ddprun::launcher
